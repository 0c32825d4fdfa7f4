#!/usr/bin/env bash
# `make gpu-wheels`: the wheels the GPU scripts (tests/gpu/run_*.sh, docs/validation.md) carry to a
# GPU host that has no network, made from PyPI and the working tree, never by hand:
#   .whl/        ansible-core 2.21.5 with its dependencies, and uv 0.13.9 (pip install --no-index
#                --no-deps --target /tmp/site .whl/*.whl on the host)
#   .gpuwheels/  the SGLang stand-in's wheel, built from tests/fixtures/sglang_standin, and the pins
#                tests/gpu/sglang.yml installs beside it (ml_env_find_links, ml_env_no_index)
# Every wheel downloaded is pinned with its sha256 in tools/gpu-wheels.lock. Both directories are
# emptied first and filled only when everything below passed, so a wheel from an older run never
# travels and a failed run leaves nothing to carry.
#   1. the lock checked line by line (before anything is touched);
#   2. pip download of each section for the host's interpreter (CPython 3.12, manylinux x86_64),
#      every file against its hash, dependencies resolved: one the lock lacks is refused;
#   3. the stand-in's wheel, byte for byte the same for the same sources (SOURCE_DATE_EPOCH);
#   4. offline, with uv: ansible-core and uv resolve from .whl/ alone to exactly the lock's .whl/
#      pins, and sglang.yml's pins (overriding, as ml_env installs them) from .gpuwheels/ alone to
#      exactly what is there;
#   5. on a Linux x86_64 machine, ansible-core and uv installed from .whl/ as the scripts do, and run;
#   6. what was made, and the size against what the device tool carries (64 MiB in all).
# Environment: GPU_WHEELS_LOCK (another lock), GPU_WHEELS_OUT (where .whl/ and .gpuwheels/ go,
# default the repo root); pip's own configuration (index, certificate, proxy) is used as it is: the
# hashes decide what is accepted, not where it came from.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lock=${GPU_WHEELS_LOCK:-$root/tools/gpu-wheels.lock}
out=${GPU_WHEELS_OUT:-$root}
standin=$root/tests/fixtures/sglang_standin
profile=$root/tests/gpu/sglang.yml
python=$root/.build/venv/bin/python
uv=$root/.build/venv/bin/uv
# The device tool carries at most 64 MiB through `carry`, every carried path together.
limit_mib=64
# What the scripts need by name, the rest being their dependencies: ansible-core (run_*.sh) and uv
# (tests/gpu/inventory.yml's ml_env_uv_path /tmp/site/bin/uv).
whl_roots=(ansible-core uv)
# The GPU host's interpreter: Ubuntu 24.04's CPython 3.12 (glibc 2.39). pip 23 takes --platform as
# given (no older manylinux implied), so both tags are named; binary only, never an sdist built here.
target=(--only-binary=:all: --implementation cp --python-version 3.12 --abi cp312
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64)

die() { echo "gpu-wheels: $*" >&2; exit 1; }
if ! [ -x "$python" ] || ! [ -x "$uv" ]; then die "no tool venv at .build/venv (its python and uv): run make tools"; fi
[ -f "$lock" ] || die "no lock file $lock"

# 1. The lock: "# -> .whl/" or "# -> .gpuwheels/" opens a section; every other non-comment line is
#    NAME==VERSION --hash=sha256:<64 hex>, inside a section, each project once.
declare -A section=() seen=()
dir='' bad=0 n=0
while IFS= read -r line || [ -n "$line" ]; do
  n=$((n + 1))
  case $line in
    '# -> .whl/' | '# -> .gpuwheels/') dir=${line#'# -> '}; dir=${dir%/}; continue ;;
    '' | '#'*) continue ;;
  esac
  if [ -z "$dir" ]; then
    echo "gpu-wheels: $lock:$n: a pin before any '# -> .whl/' or '# -> .gpuwheels/' line: $line" >&2; bad=1; continue
  fi
  if ! [[ $line =~ ^([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][A-Za-z0-9.+!]*)\ --hash=sha256:[0-9a-f]{64}$ ]]; then
    echo "gpu-wheels: $lock:$n: not NAME==VERSION --hash=sha256:<64 hex digits>: $line" >&2; bad=1; continue
  fi
  # PEP 503 names: PyYAML, pyyaml and py_yaml are one project.
  name=$(sed -E 's/[-_.]+/-/g' <<<"${BASH_REMATCH[1],,}")
  if [ -n "${seen[$name]:-}" ]; then
    echo "gpu-wheels: $lock:$n: $name is pinned twice (first on line ${seen[$name]})" >&2; bad=1; continue
  fi
  seen[$name]=$n
  section[$dir]+="$line"$'\n'
done <"$lock"
for d in .whl .gpuwheels; do
  [ -n "${section[$d]:-}" ] || { echo "gpu-wheels: $lock: no pins under '# -> $d/'" >&2; bad=1; }
done
for r in "${whl_roots[@]}"; do
  grep -q "^$r==" <<<"${section[.whl]:-}" || { echo "gpu-wheels: $lock: $r is not pinned under '# -> .whl/'" >&2; bad=1; }
done
[ "$bad" = 0 ] || die "$lock is malformed: nothing made, nothing removed"

# Emptied now: from here on a failure leaves no wheels at all rather than old ones.
rm -rf "$out/.whl" "$out/.gpuwheels"
mkdir -p "$root/.build"
stage=$(mktemp -d "$root/.build/gpu-wheels.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/.whl" "$stage/.gpuwheels" "$stage/req"

# 2. Downloads, per section. Without --no-deps: pip resolves each wheel's requirements, and in
#    hash-checking mode it refuses one the lock does not pin (printing the line to add).
for d in .whl .gpuwheels; do
  printf '%s' "${section[$d]}" >"$stage/req/$d.txt"
  echo "gpu-wheels: downloading $d/: $(grep -c . "$stage/req/$d.txt") pinned wheel(s)"
  "$python" -m pip download -q --disable-pip-version-check --no-input --require-hashes "${target[@]}" \
    --dest "$stage/$d" -r "$stage/req/$d.txt" \
    || die "pip download of the $d/ pins of $lock failed (its message is above)"
  got=$(find "$stage/$d" -type f -name '*.whl' | wc -l)
  want=$(grep -c . "$stage/req/$d.txt")
  [ "$got" = "$want" ] || die "pip left $got wheels for the $want pins of $d/: $(ls "$stage/$d")"
done

# 3. The stand-in, from the working tree (tools/standin-wheel.sh: the same bytes for the same
#    sources): no dependency (its idna==3.7 is overridden on the host).
standin_wheel=$("$root/tools/standin-wheel.sh") || die "building the stand-in's wheel from $standin failed"
cp "$standin_wheel" "$stage/.gpuwheels/"

# 4. Offline resolutions with uv on the host's platform: the carried directories alone suffice, and
#    hold nothing that is not needed.
names() { sed -nE 's/^([A-Za-z0-9][A-Za-z0-9._-]*)==.*/\1/p' | tr '[:upper:]' '[:lower:]' | sed -E 's/[-_.]+/-/g' | sort; }
resolve() {  # $1 = directory, $2 = requirements, $3 = overrides: the names resolved
  "$uv" pip compile -q --no-config --no-header --no-annotate --no-index --find-links "$1" \
    --python-version 3.12 --python-platform x86_64-manylinux_2_28 --overrides "$3" "$2" | names
}
printf '%s\n' "${whl_roots[@]}" | while read -r r; do grep "^$r==" "$stage/req/.whl.txt" | cut -d' ' -f1; done >"$stage/req/roots.txt"
resolved=$(resolve "$stage/.whl" "$stage/req/roots.txt" /dev/null) \
  || die "${whl_roots[*]} do not resolve from .whl/ alone (uv's message is above)"
pinned=$(names <"$stage/req/.whl.txt")
[ "$resolved" = "$pinned" ] || die ".whl/ pins and what ${whl_roots[*]} need differ:
$(diff <(echo "$pinned") <(echo "$resolved") | sed -n 's/^</  pinned, not needed:/p; s/^>/  needed, not pinned:/p')"
# sglang.yml's pins as ml_env installs them: each a requirement and an override.
"$python" -c 'import sys, yaml
pins = yaml.safe_load(open(sys.argv[1]))["ml_env_extra_packages"]
print("\n".join("%s==%s" % (name, version) for name, version in pins.items()))' "$profile" >"$stage/req/profile.txt"
resolved=$(resolve "$stage/.gpuwheels" "$stage/req/profile.txt" "$stage/req/profile.txt") \
  || die "the pins of ${profile#"$root"/} do not resolve from .gpuwheels/ alone (uv's message is above)"
present=$(find "$stage/.gpuwheels" -type f -name '*.whl' -printf '%f\n' | sed -E 's/^([^-]+)-([^-]+)-.*/\1==\2/' | names)
[ "$resolved" = "$present" ] || die ".gpuwheels/ holds $(echo "$present" | xargs) but ${profile#"$root"/} needs $(echo "$resolved" | xargs)"

# 5. As the scripts install them (CPython 3.12 here as there): ansible-core runs, uv runs.
if [ "$(uname -sm)" = "Linux x86_64" ]; then
  "$python" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --target "$stage/site" \
    "$stage/.whl/"*.whl || die "the .whl/ wheels do not install as tests/gpu/run_*.sh install them"
  # Read whole, then parsed: a reader that stops early would break ansible's pipe.
  says=$(PYTHONPATH=$stage/site "$python" "$stage/site/bin/ansible" --version) || die "ansible from the .whl/ wheels does not run"
  core=$(sed -n 1p <<<"$says")
  location=$(sed -n 's/^ *ansible python module location = //p' <<<"$says")
  case $location in "$stage/site/"*) ;; *) die "ansible ran from $location, not from the .whl/ wheels" ;; esac
  uv_says=$("$stage/site/bin/uv" --version) || die "uv from the .whl/ wheels does not run"
  echo "gpu-wheels: installed from .whl/ as the GPU scripts do: $core; $uv_says"
  rm -rf "$stage/site"
else
  echo "gpu-wheels: not Linux x86_64 here: the .whl/ wheels were not installed and run"
fi

# 6. In place (readable by all: pip and flit write some with mode 0600), and what was made.
chmod 0644 "$stage/.whl/"*.whl "$stage/.gpuwheels/"*.whl
mv "$stage/.whl" "$stage/.gpuwheels" "$out/"
for d in .whl .gpuwheels; do
  echo "gpu-wheels: $d/ ($(du -sk "$out/$d" | cut -f1) KiB)"
  (cd "$out/$d" && find . -type f -name '*.whl' -printf '%s %f\n' | sort -k2 \
    | while read -r size file; do printf '  %8s KiB  %s  %s\n' $((size / 1024)) "$(sha256sum "$file" | cut -c1-12)" "$file"; done)
done
total=$(find "$out/.whl" "$out/.gpuwheels" -type f -name '*.whl' -printf '%s\n' | awk '{ s += $1 } END { print s }')
largest=$(find "$out/.whl" "$out/.gpuwheels" -type f -name '*.whl' -printf '%s %f\n' | sort -n | tail -n1)
mib() { awk -v s="$1" 'BEGIN { printf "%.1f", s / 1048576 }'; }
total_mib=$(mib "$total")
echo "gpu-wheels: $total_mib MiB in all (largest: ${largest#* }, $(mib "${largest%% *}") MiB)"
if [ "$total" -gt $((limit_mib * 1048576)) ]; then
  die "$total_mib MiB is more than the $limit_mib MiB the device tool carries; the largest wheel is ${largest#* }"
fi
