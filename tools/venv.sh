#!/usr/bin/env bash
# Creates (or reuses) the pinned tool venv in .build/venv. Reuse is decided by a stamp holding the
# hash of the lock file and the interpreter, so a second run costs a few milliseconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.build/venv"
uv_version=0.13.9

find_python() {
  local c
  for c in "${TOOLS_PYTHON:-}" python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
    # pyenv shims exist for versions that are not selected: ask the interpreter itself, and take
    # the base interpreter when it is a venv (our own venv comes first on PATH under make).
    [ -n "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12); print(getattr(sys, "_base_executable", sys.executable))' 2>/dev/null && return
  done
  echo "tools/venv.sh: no Python 3.12 found (ansible-core 2.21 and molecule need it); set TOOLS_PYTHON=/path/to/python3.12" >&2
  exit 1
}

python=$(find_python)
want=$( { cat "$root/tools/requirements.txt"; echo "$python $uv_version"; } | sha256sum | cut -c1-16)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "building tool venv with $python" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "uv==$uv_version"
VIRTUAL_ENV="$venv" "$venv/bin/uv" pip sync -q --python "$venv/bin/python" "$root/tools/requirements.txt"
echo "$want" >"$venv/.stamp"
