#!/usr/bin/env bash
# Galaxy is unreachable: takes the collections molecule needs (community.docker for its docker
# driver, ansible.posix) out of the `ansible` wheel on PyPI and unpacks only them into
# .build/collections. The wheel is kept in .build/cache, so a rerun downloads nothing.
# The collections of `ansible` 14.5.0 (community.docker 5.4.0, ansible.posix 2.2.2) accept
# ansible-core 2.17 and later: one set serves both tool venvs (tools/venv.sh, tools/venv.sh floor).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ansible_version=14.5.0
wanted=(community/docker ansible/posix)
dest="$root/.build/collections"
stamp="$dest/.stamp"
want="$ansible_version ${wanted[*]}"
[ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && exit 0

cache="$root/.build/cache"
mkdir -p "$cache"
wheel="$cache/ansible-$ansible_version-py3-none-any.whl"
# Either tool venv's pip will do: `make tools-floor` may run before the other venv exists.
python=
for p in "$root/.build/venv/bin/python" "$root/.build/venv-floor/bin/python"; do
  [ -x "$p" ] && { python=$p; break; }
done
[ -n "$python" ] || { echo "tools/collections.sh: no tool venv yet (tools/venv.sh first)" >&2; exit 1; }
if [ ! -f "$wheel" ]; then
  "$python" -m pip download -q --disable-pip-version-check --no-deps \
    -d "$cache" "ansible==$ansible_version"
fi
rm -rf "$dest"
mkdir -p "$dest"
"$python" - "$wheel" "$dest" "${wanted[@]}" <<'PY'
import sys, zipfile
wheel, dest, *wanted = sys.argv[1:]
prefixes = tuple(f"ansible_collections/{w}/" for w in wanted)
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.startswith(prefixes)]
    z.extractall(dest, members)
print(f"unpacked {len(members)} files of {', '.join(wanted)}", file=sys.stderr)
PY
echo "$want" >"$stamp"
