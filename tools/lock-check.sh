#!/usr/bin/env bash
# `make lock-check` (part of `make test`): two real resolutions against PyPI through playbooks/lock.yml.
#   1. The CI profile's committed lock is what its pins resolve to today: same distributions, same
#      hashes (a stale commit, or a lock the role could not make again, fails here).
#   2. The PyPI equivalent of the field-notes stack (tools/lock-field-notes-pypi.yml) resolves with the
#      role's own settings and the lock keeps all five pins (lock.yml's last task checks them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lock() {  # $1 = profile, $2 = destination, rest = extra args
  local profile=$1 dest=$2; shift 2
  ansible-playbook playbooks/lock.yml -e "ml_env_profile=$profile" -e "ml_env_uv_path=$root/.build/venv/bin/uv" \
    -e "ml_env_lock_dest=$dest" "$@" >"$tmp/$profile.log" 2>&1 || { tail -n 40 "$tmp/$profile.log"; exit 1; }
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

start=$SECONDS
lock field-notes-pypi "$tmp/field-notes.txt" -e @tools/lock-field-notes-pypi.yml
pins=$(grep -E '^(torch|sgl-kernel|flashinfer-python|flashinfer-cubin|sglang)==' "$tmp/field-notes.txt" | cut -d' ' -f1 | tr '\n' ' ')
echo "lock-check: the field-notes stack from PyPI resolved in $((SECONDS - start)) s to" \
  "$(grep -c '^[a-z]' "$tmp/field-notes.txt") distributions, every pin held: $pins"
