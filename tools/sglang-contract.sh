#!/usr/bin/env bash
# `make contract` (part of `make test`): what the collection relies on in SGLang (log texts, arguments,
# endpoints, fields, metrics: plugins/module_utils/sglang/versions.py), checked in the real wheels of
# every supported release, never imported (sglang needs torch).
#   1. the wheels pinned in tools/sglang-wheels.lock, downloaded into .build/sglang-wheels/ only when
#      missing (pip download --no-deps --require-hashes): later runs are offline;
#   2. every wheel's sha256 against the lock, on every run;
#   3. tools/sglang_contract.py check: one line per release, one FAILED line per thing that moved;
#   4. its self-test: a copy of a real wheel with the ready line changed must fail, naming it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$EPOCHREALTIME
python=$root/.build/venv/bin/python
[ -x "$python" ] || { echo "sglang-contract: no tool venv at .build/venv: run make tools" >&2; exit 1; }
lock=tools/sglang-wheels.lock
cache=.build/sglang-wheels
# The wheel a Debian 12 host (glibc 2.36) with CPython 3.11 installs. 0.5.23 has cp311, cp312 and
# cp313 manylinux_2_34 wheels and the tool venv is 3.12, so the target is named rather than taken
# from this interpreter; pip 23 matches --platform as given (no older manylinux), hence 2_34 itself.
# A py3-none-any wheel (0.5.9) matches it as well. Binary only: never build an sdist.
target=(--only-binary=:all: --implementation cp --python-version 3.11 --abi cp311 --platform manylinux_2_34_x86_64)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$cache"

elapsed() { awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# The cached wheel of version $1 whose sha256 is $2, or nothing.
cached() {
  local f
  for f in "$cache/sglang-$1-"*.whl; do
    if [ -f "$f" ] && [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$2" ]; then echo "$f"; return; fi
  done
}

wheels=()
downloaded=0
while read -r requirement hash; do
  version=${requirement#sglang==}
  hash=${hash#--hash=sha256:}
  wheel=$(cached "$version" "$hash")
  if [ -z "$wheel" ]; then
    # A wheel of this version with another hash is no cache of the pinned one.
    rm -f "$cache/sglang-$version-"*.whl
    # One requirement per run: pip refuses two versions of one project in one requirements file.
    echo "sglang==$version --hash=sha256:$hash" >"$tmp/requirement.txt"
    "$python" -m pip download -q --disable-pip-version-check --no-deps --require-hashes "${target[@]}" \
      --dest "$cache" -r "$tmp/requirement.txt"
    wheel=$(cached "$version" "$hash")
    [ -n "$wheel" ] || { echo "sglang-contract: pip left no wheel of sglang $version with sha256 $hash in $cache" >&2; exit 1; }
    downloaded=$((downloaded + 1))
  fi
  wheels+=("$wheel")
done < <(grep -E '^sglang==' "$lock")
echo "sglang-contract: ${#wheels[@]} wheels in $cache match $lock ($downloaded downloaded, $(elapsed) s)"

rc=0
"$python" tools/sglang_contract.py check --lock "$lock" "${wheels[@]}" || rc=$?
[ "$rc" != 0 ] || "$python" tools/sglang_contract.py self-test "${wheels[@]}" || rc=$?
echo "sglang-contract: $([ "$rc" = 0 ] && echo passed || echo "failed (rc $rc)") in $(elapsed) s"
exit "$rc"
