#!/usr/bin/env bash
# ansible-test wants the collection at .../ansible_collections/inferops/gpu: lay the checkout's
# files out there (tracked and new, not ignored) and run sanity on that copy.
# TOOLS_VENV=NAME runs it with the ansible-test of .build/venv-NAME (tools/venv.sh NAME), e.g. floor
# for the oldest supported ansible-core; each venv has its own copy and ansible-test home.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
suffix=${TOOLS_VENV:+-$TOOLS_VENV}
if [ -n "$suffix" ]; then
  export PATH="$root/.build/venv$suffix/bin:$PATH"
fi
tree="$root/.build/sanity$suffix/ansible_collections/inferops/gpu"
python_version=3.12

# ansible-test skips its shellcheck test when the program is missing.
"$root/tools/apt-install.sh" shellcheck

rm -rf "$tree"
mkdir -p "$tree"
(cd "$root" && git ls-files -z --cached --others --exclude-standard) \
  | grep -zv '^\.collections/' \
  | (cd "$root" && xargs -0 cp --parents -P -t "$tree")
(cd "$tree" && git init -q && git add -A)

# Its venvs (one a test, named by their requirements' hash) outlive the checkout: built from PyPI
# on a clean clone they were three quarters of sanity's time (838 s against 199 s, both beside the
# rolling and gateway lanes). Kept per ansible-core version in the machine's cache, as the base
# images are (ansible-test checks each venv's marker itself); INFEROPS_TOOL_CACHE moves it.
cache_root=${INFEROPS_TOOL_CACHE:-$HOME/.cache/inferops-gpu}
core_version=$(python -c 'from ansible.release import __version__; print(__version__)')
home="$cache_root/ansible-test-home-$core_version"
# ansible-test bootstraps pip in its venvs with a get-pip script from a host that is not
# reachable here; tools/get_pip_shim.py does that job with the venv's own ensurepip.
pip_version=$(python -c 'import sys, types; from ansible_test._internal.python_requirements import get_venv_packages as g; print(g(types.SimpleNamespace(version=sys.argv[1]))["pip"])' "$python_version")
mkdir -p "$home/.ansible/test/cache"
cp "$root/tools/get_pip_shim.py" "$home/.ansible/test/cache/get_pip_${pip_version//./_}.py"

cd "$tree"
HOME="$home" ansible-test sanity --color no --python "$python_version" --requirements "$@"

# Modules run on the targets' Python, not the controller's: compile and import them on the oldest
# supported target Python and on Debian 12's, where those interpreters exist on this machine.
for v in ${SANITY_TARGET_PYTHONS:-3.9 3.11}; do
  bin=$(find "${PYENV_ROOT:-$HOME/.pyenv}/versions" -maxdepth 2 -path "*/$v.*/bin" 2>/dev/null | sort -V | tail -n1)
  if [ -z "$bin" ] && ! command -v "python$v" >/dev/null; then
    echo "sanity: no Python $v here, target checks for it skipped" >&2
    continue
  fi
  PATH="${bin:+$bin:}$PATH" HOME="$home" ansible-test sanity --color no --python "$v" --requirements \
    --test compile --test import "$@"
done
