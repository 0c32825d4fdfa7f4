#!/usr/bin/env bash
# The collection as Galaxy users get it: lints the changelog fragments, checks that each role
# README's variables section is what its argument spec generates, builds the tarball into
# .build/dist, proves it holds no development file, installs it offline into a temporary path
# (Galaxy is unreachable) and renders the documentation of every module, filter and role entry
# point from there with ansible-doc, failing on any markup that does not resolve. Then writes the
# execution environment's build context into .build/ee-context and checks it. Building the image
# itself needs a container registry for the base image, which is not reachable here.
# Runs under make (the tool venv first on PATH); `make package` is the entry point.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Bytecode out of the tree (no __pycache__ for the tarball to pick up), as make sets it.
export ANSIBLE_NOCOLOR=1 NO_COLOR=1 PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-$root/.build/pycache}"
limit=300 # seconds any one tool call may take; each takes a few seconds here

fail() {
  echo "package-check: $*" >&2
  exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "package-check: antsibull-changelog lint" >&2
timeout "$limit" antsibull-changelog lint || fail "changelog fragments do not lint (changelogs/fragments/)"
timeout "$limit" antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml || fail "changelogs/changelog.yaml does not lint"
timeout "$limit" antsibull-changelog generate --output "$work/CHANGELOG.md" --output-format md
cmp -s "$work/CHANGELOG.md" CHANGELOG.md \
  || fail "CHANGELOG.md is not what changelogs/changelog.yaml generates: run antsibull-changelog generate"

# Each role README's variables section is generated from its meta/argument_specs.yml.
echo "package-check: role READMEs against their argument specs" >&2
timeout "$limit" python tools/role_readme.py --check \
  || fail "a role README's variables section is not what its meta/argument_specs.yml generates: run python tools/role_readme.py --write"

dist="$root/.build/dist"
rm -rf "$dist"
mkdir -p "$dist"
timeout "$limit" ansible-galaxy collection build --output-path "$dist" "$root" >/dev/null
tarballs=("$dist"/*.tar.gz)
if [ "${#tarballs[@]}" != 1 ] || [ ! -f "${tarballs[0]}" ]; then
  fail "expected one tarball in $dist"
fi
tarball=${tarballs[0]}

tar -tzf "$tarball" | sed 's#/$##' | sort >"$work/members"

# Checked against two lists: galaxy.yml's build_ignore (did ansible-galaxy apply every pattern the
# way it was meant?) and this fixed list of the harness (does build_ignore still name all of it?).
python - "$root/galaxy.yml" "$work/members" <<'PY'
import fnmatch
import sys

import yaml

galaxy_file, members_file = sys.argv[1:]
with open(galaxy_file, encoding="utf-8") as f:
    ignore = yaml.safe_load(f)["build_ignore"]
with open(members_file, encoding="utf-8") as f:
    members = [m for m in f.read().splitlines() if m]
dev = [
    ".build", ".ci", ".collections", ".config", ".gpuwheels", ".whl", ".ansible-lint", ".gitignore",
    "Makefile", "ansible.cfg", "tools", "bench", "molecule", "extensions/molecule", "inventories/local",
    "tests", "tests/output", "tests/gpu/results", "execution-environment.yml",
]
needed = [
    "MANIFEST.json", "FILES.json", "README.md", "COPYING", "CHANGELOG.md", "changelogs/changelog.yaml",
    "meta/runtime.yml", "site.yml", "rolling.yml", "verify.yml", "playbooks/site.yml",
    "plugins/modules", "plugins/module_utils", "plugins/filter", "roles", "docs", "inventories/example",
]


def matches(path, pattern):
    # A pattern that names a directory also covers everything under it, as in ansible-galaxy.
    parts = path.split("/")
    return any(fnmatch.fnmatch("/".join(parts[:i]), pattern) for i in range(1, len(parts) + 1))


bad = sorted({m for m in members for p in ignore + dev if matches(m, p) or m == p or m.startswith(p + "/")})
missing = [n for n in needed if n not in members]
for m in bad:
    sys.stderr.write(f"package-check: development file in the tarball: {m}\n")
for n in missing:
    sys.stderr.write(f"package-check: the tarball lacks {n}\n")
sys.exit(1 if bad or missing else 0)
PY

files=$(grep -cv '/$' <(tar -tzf "$tarball"))
size=$(du -h "$tarball" | cut -f1)
echo "package-check: $(basename "$tarball"): $size, $files files" >&2

# Only the installed copy from here on: no ansible.cfg (its collections path holds the source tree,
# which ansible-galaxy would take as already installed), no cwd inside a collection.
install="$work/collections"
: >"$work/ansible.cfg"
export ANSIBLE_CONFIG="$work/ansible.cfg" ANSIBLE_COLLECTIONS_PATH="$install" ANSIBLE_HOME="$work/ansible-home"
cd "$work"
timeout "$limit" ansible-galaxy collection install --offline --force -p "$install" "$tarball" >/dev/null
coll="$install/ansible_collections/inferops/gpu"
mapfile -t modules < <(find "$coll/plugins/modules" -name '*.py' ! -name '__init__.py' -printf 'inferops.gpu.%f\n' | sed 's/\.py$//' | sort)
mapfile -t filters < <(find "$coll/plugins/filter" -name '*.yml' -printf 'inferops.gpu.%f\n' | sed 's/\.yml$//' | sort)
mapfile -t lookups < <(find "$coll/plugins/lookup" -name '*.py' ! -name '__init__.py' -printf 'inferops.gpu.%f\n' | sed 's/\.py$//' | sort)
mapfile -t roles < <(find "$coll/roles" -mindepth 3 -maxdepth 3 -path '*/meta/argument_specs.yml' | awk -F/ '{print "inferops.gpu." $(NF-2)}' | sort)
if [ "${#modules[@]}" = 0 ] || [ "${#filters[@]}" = 0 ] || [ "${#lookups[@]}" = 0 ] || [ "${#roles[@]}" = 0 ]; then
  fail "found ${#modules[@]} modules, ${#filters[@]} filters, ${#lookups[@]} lookups, ${#roles[@]} roles in the installed collection"
fi

# ansible-core warns about its own internal collection when it lists roles; that one line is not ours.
noise='Collection at .*/ansible/_internal/ansible_collections/ansible/_protomatter. does not have a MANIFEST.json'
doc() { # doc TYPE OUTFILE ARGS...: ansible-doc with a clean stderr
  local type=$1 out=$2
  shift 2
  timeout "$limit" ansible-doc -t "$type" "$@" >"$out" 2>"$work/stderr" || {
    cat "$work/stderr" >&2
    fail "ansible-doc -t $type $* failed"
  }
  if grep -v -E "$noise" "$work/stderr" | grep -q .; then
    grep -v -E "$noise" "$work/stderr" >&2
    fail "ansible-doc -t $type $* wrote to stderr"
  fi
}

mkdir "$work/text"
doc module "$work/modules.json" --json "${modules[@]}"
doc filter "$work/filters.json" --json "${filters[@]}"
doc lookup "$work/lookups.json" --json "${lookups[@]}"
doc role "$work/roles.json" --json "${roles[@]}"
for module in "${modules[@]}"; do doc module "$work/text/module $module" "$module"; done
for filter in "${filters[@]}"; do doc filter "$work/text/filter $filter" "$filter"; done
for lookup in "${lookups[@]}"; do doc lookup "$work/text/lookup $lookup" "$lookup"; done
for role in "${roles[@]}"; do
  mapfile -t entries < <(python -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))[sys.argv[2]]["entry_points"]))' "$work/roles.json" "$role")
  for entry in "${entries[@]}"; do
    doc role "$work/text/role $role entry point $entry" -e "$entry" "$role"
  done
done

# Rendered text keeps a macro it could not resolve literally (R(x) without its anchor, say).
if grep -r -n -E '\b(B|C|E|I|L|M|O|P|R|RV|U|V|HORIZONTALLINE)\(' "$work/text" >"$work/literal"; then
  sed "s#^$work/text/##" "$work/literal" >&2
  fail "ansible-doc left the markup above unresolved"
fi

# The raw markup, parsed strictly: malformed macros, and O()/RV() naming an option or return value
# that the plugin or role entry point does not have.
python - "$work/modules.json" "$work/filters.json" "$work/lookups.json" "$work/roles.json" <<'PY'
import json
import sys

from antsibull_docs_parser import dom
from antsibull_docs_parser.parser import Context, parse

errors = []
MARKUP_KEYS = {"description", "short_description", "notes", "requirements", "details", "version_added_collection"}


def names(options, key="suboptions", prefix=""):
    out = set()
    for name, spec in (options or {}).items():
        out.add(prefix + name)
        for sub in ("suboptions", "options", "contains"):
            if isinstance(spec, dict) and spec.get(sub):
                out |= names(spec[sub], sub, prefix + name + ".")
    return out


def texts(node, where):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("description", "short_description", "notes", "requirements", "details"):
                for i, text in enumerate([value] if isinstance(value, str) else value or []):
                    if isinstance(text, str):
                        yield f"{where}.{key}[{i}]", text
            elif key == "choices" and isinstance(value, dict):
                for choice, text in value.items():
                    for i, t in enumerate([text] if isinstance(text, str) else text or []):
                        yield f"{where}.choices.{choice}[{i}]", t
            elif key not in ("default", "sample", "example", "examples", "aliases", "seealso"):
                yield from texts(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from texts(value, f"{where}[{i}]")


def plain(name):
    return name.split("=", 1)[0].replace("[]", "").split("[", 1)[0]


def check(fqcn, kind, doc, options, returns, entry=None):
    context = Context(current_plugin=dom.PluginIdentifier(fqcn=fqcn, type=kind), role_entrypoint=entry)
    label = fqcn + (f" (entry point {entry})" if entry else "")
    for where, text in texts(doc, label):
        try:
            paragraphs = parse(text, context, errors="exception", strict=True)
        except ValueError as exc:
            errors.append(f"{where}: {exc}: {text!r}")
            continue
        for paragraph in paragraphs:
            for part in paragraph:
                if isinstance(part, dom.OptionNamePart) and part.plugin and part.plugin.fqcn == fqcn \
                        and (part.entrypoint or None) == entry and plain(part.name) not in options:
                    errors.append(f"{where}: O({part.name}) is not an option here")
                if isinstance(part, dom.ReturnValuePart) and part.plugin and part.plugin.fqcn == fqcn \
                        and plain(part.name) not in returns:
                    errors.append(f"{where}: RV({part.name}) is not a return value here")


modules_file, filters_file, lookups_file, roles_file = sys.argv[1:]
for path, kind in ((modules_file, "module"), (filters_file, "filter"), (lookups_file, "lookup")):
    with open(path, encoding="utf-8") as f:
        for fqcn, data in json.load(f).items():
            doc = data.get("doc") or {}
            returns = names(data.get("return"))
            check(fqcn, kind, doc, names(doc.get("options")), returns)
            check(fqcn, kind, data.get("return") or {}, names(doc.get("options")), returns)
with open(roles_file, encoding="utf-8") as f:
    for fqcn, data in json.load(f).items():
        for entry, spec in data["entry_points"].items():
            check(fqcn, "role", spec, names(spec.get("options")), set(), entry)
for e in errors:
    sys.stderr.write(f"package-check: markup: {e}\n")
sys.exit(1 if errors else 0)
PY
# The collection's playbooks resolve from the installed copy (ansible-playbook inferops.gpu.site).
printf 'all:\n  hosts:\n    localhost:\n      ansible_connection: local\n' >"$work/inventory.yml"
for playbook in "$coll"/playbooks/*.yml; do
  name="inferops.gpu.$(basename "$playbook" .yml)"
  timeout "$limit" ansible-playbook -i "$work/inventory.yml" --syntax-check "$name" >/dev/null 2>"$work/stderr" || {
    cat "$work/stderr" >&2
    fail "ansible-playbook --syntax-check $name failed from the installed tarball"
  }
done
echo "package-check: ansible-doc renders ${#modules[@]} modules, ${#filters[@]} filters, ${#lookups[@]} lookup and ${#roles[@]} roles from the installed tarball without markup errors" >&2
cd "$root"

# The execution environment's build context; ansible-builder reads the tarball the definition names.
ee="$root/.build/ee-context"
rm -rf "$ee"
timeout "$limit" ansible-builder create -f execution-environment.yml -c "$ee" --output-filename Containerfile >/dev/null
grep -q . "$ee/Containerfile" 2>/dev/null || fail "ansible-builder wrote no Containerfile into $ee"
grep -q 'inferops-gpu-' "$ee/_build/requirements.yml" 2>/dev/null || fail "$ee/_build/requirements.yml does not name the collection tarball"
find "$ee/_build" -name "$(basename "$tarball")" | grep -q . || fail "the collection tarball is not in the context $ee"
grep -q 'ansible-galaxy collection install' "$ee/Containerfile" || fail "the Containerfile installs no collection"
echo "package-check: execution environment context in $ee (building the image needs a registry: not done here)" >&2
