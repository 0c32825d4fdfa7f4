#!/usr/bin/env bash
# Creates (or reuses) a pinned tool venv. Reuse is decided by a stamp holding the hash of the lock
# file and the interpreter, so a second run costs a few milliseconds.
#   tools/venv.sh                  .build/venv from tools/requirements.txt (the newest ansible-core)
#   tools/venv.sh NAME [LOCK]      .build/venv-NAME from LOCK (default tools/requirements-NAME.txt),
#                                  e.g. `tools/venv.sh floor` for the oldest supported ansible-core
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=${1:-}
venv="$root/.build/venv${name:+-$name}"
lock=${2:-$root/tools/requirements${name:+-$name}.txt}
[ -f "$lock" ] || { echo "tools/venv.sh: no lock file $lock" >&2; exit 1; }
uv_version=0.13.9

find_python() {
  local c
  for c in "${TOOLS_PYTHON:-}" python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
    # pyenv shims exist for versions that are not selected: ask the interpreter itself, and take
    # the base interpreter when it is a venv (our own venv comes first on PATH under make).
    [ -n "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12); print(getattr(sys, "_base_executable", sys.executable))' 2>/dev/null && return
  done
  echo "tools/venv.sh: no Python 3.12 found (the pinned toolchains are locked for it); set TOOLS_PYTHON=/path/to/python3.12" >&2
  exit 1
}

python=$(find_python)
want=$( { cat "$lock"; echo "$python $uv_version"; } | sha256sum | cut -c1-16)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "building tool venv $venv with $python" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "uv==$uv_version"
VIRTUAL_ENV="$venv" "$venv/bin/uv" pip sync -q --python "$venv/bin/python" "$lock"
echo "$want" >"$venv/.stamp"
