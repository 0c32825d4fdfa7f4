#!/usr/bin/env bash
# `make lock-check` (part of `make test`): real resolutions against PyPI through playbooks/lock.yml.
#   1. The CI profile's committed lock is what its pins resolve to today: same distributions, same
#      hashes (a stale commit, or a lock the role could not make again, fails here).
#   2. The PyPI equivalent of each built-in SGLang stack, one file each (tools/lock-NAME.yml defines
#      the profile NAME): the field-notes stack (tools/lock-field-notes-pypi.yml) and the current
#      release (tools/lock-sglang-0.5.23-pypi.yml) resolve with the role's own settings and each lock
#      keeps every pin of its profile (lock.yml's last task checks them). They run side by side: the
#      check costs about as long as the slowest one, not the sum.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lock() {  # $1 = profile, $2 = destination, rest = extra args
  local profile=$1 dest=$2; shift 2
  ansible-playbook playbooks/lock.yml -e "ml_env_profile=$profile" -e "ml_env_uv_path=$root/.build/venv/bin/uv" \
    -e "ml_env_lock_dest=$dest" "$@" >"$tmp/$profile.log" 2>&1 ||
    { echo "lock-check: $profile did not resolve; the end of its log:"; tail -n 40 "$tmp/$profile.log"; exit 1; }
}
requirements() { grep -v '^ *#' "$1"; }

lock ci-lock "$tmp/ci-lock.txt" -e @extensions/molecule/ml_env/vars/ci.yml
committed=extensions/molecule/ml_env/locks/ci-lock.txt
if ! diff <(requirements "$committed") <(requirements "$tmp/ci-lock.txt") >"$tmp/diff"; then
  echo "lock-check: $committed is not what its pins resolve to today; make it again (see the file's header):"
  cat "$tmp/diff"
  exit 1
fi
echo "lock-check: $committed matches a fresh resolution ($(grep -c '^[a-z]' "$committed") distributions)"

# The stack's own packages in a lock, to show what was held (both names of the kernel package).
stack_pins() {
  grep -E '^(torch|sgl-kernel|sglang-kernel|flashinfer-(python|cubin|jit-cache)|sglang)==' "$1" | cut -d' ' -f1 | tr '\n' ' '
}
pypi_lock() {  # $1 = tools/lock-NAME.yml, in a subshell: its own time and verdict
  local vars=$1 name start
  name=$(basename "$vars" .yml); name=${name#lock-}
  start=$SECONDS
  lock "$name" "$tmp/$name.txt" -e "@$vars"
  echo "lock-check: $name resolved in $((SECONDS - start)) s to $(grep -c '^[a-z]' "$tmp/$name.txt") distributions," \
    "every pin held: $(stack_pins "$tmp/$name.txt")" >"$tmp/$name.done"
}
pids=()
for vars in tools/lock-*-pypi.yml; do
  pypi_lock "$vars" &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
cat "$tmp"/*.done 2>/dev/null || true
exit $failed
