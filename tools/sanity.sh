#!/usr/bin/env bash
# ansible-test wants the collection at .../ansible_collections/inferops/gpu: lay the checkout's
# files out there (tracked and new, not ignored) and run sanity on that copy.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tree="$root/.build/sanity/ansible_collections/inferops/gpu"
python_version=3.12

# ansible-test skips its shellcheck test when the program is missing.
"$root/tools/apt-install.sh" shellcheck

rm -rf "$tree"
mkdir -p "$tree"
(cd "$root" && git ls-files -z --cached --others --exclude-standard) \
  | grep -zv '^\.collections/' \
  | (cd "$root" && xargs -0 cp --parents -P -t "$tree")
(cd "$tree" && git init -q && git add -A)

# ansible-test bootstraps pip in its venvs with a get-pip script from a host that is not
# reachable here; tools/get_pip_shim.py does that job with the venv's own ensurepip.
home="$root/.build/ansible-test-home"
pip_version=$(python -c 'import sys, types; from ansible_test._internal.python_requirements import get_venv_packages as g; print(g(types.SimpleNamespace(version=sys.argv[1]))["pip"])' "$python_version")
mkdir -p "$home/.ansible/test/cache"
cp "$root/tools/get_pip_shim.py" "$home/.ansible/test/cache/get_pip_${pip_version//./_}.py"

cd "$tree"
HOME="$home" ansible-test sanity --color no --python "$python_version" --requirements "$@"
