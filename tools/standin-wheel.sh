#!/usr/bin/env bash
# Prints the path of the SGLang stand-in's wheel (tests/fixtures/sglang_standin), built on this
# machine once per content of its sources: .build/standin-wheel/<key>/sglang-<version>-py3-none-any.whl,
# byte for byte the same for the same sources (SOURCE_DATE_EPOCH). The scenarios' prepare playbooks
# (extensions/molecule/shared/tasks/standin_wheel.yml), tools/hosts.sh and tools/gpu-wheels.sh copy
# this one file: copying the 33 source files into every test host and building there took about 65 s
# of each scenario's prepare. Scenarios in parallel lanes may call it at once: each builds in a
# directory of its own and the first rename wins. Its build backend (flit_core, pinned in the
# stand-in's pyproject.toml) comes from the index.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
standin=$root/tests/fixtures/sglang_standin
python=${STANDIN_WHEEL_PYTHON:-$root/.build/venv/bin/python}
# The build fetches its backend from the index: a hung index must not hang a scenario's prepare.
limit=${STANDIN_WHEEL_TIMEOUT:-300}
version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' "$standin/pyproject.toml")
key=$(cd "$standin" && find . -type f ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
dir=$root/.build/standin-wheel/$key
wheel=$dir/sglang-$version-py3-none-any.whl
if [ ! -f "$wheel" ]; then
  mkdir -p "$root/.build/standin-wheel"
  stage=$(mktemp -d "$root/.build/standin-wheel/.build-XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  SOURCE_DATE_EPOCH=315532800 timeout -k 10 "$limit" "$python" -m pip wheel -q --disable-pip-version-check --no-input --no-deps \
    -w "$stage" "$standin" >&2 || { echo "standin-wheel: building the stand-in from $standin failed (or ran past ${limit} s)" >&2; exit 1; }
  [ -f "$stage/${wheel##*/}" ] || { echo "standin-wheel: no ${wheel##*/} after the build: $(ls "$stage")" >&2; exit 1; }
  chmod 0755 "$stage" && chmod 0644 "$stage/${wheel##*/}"
  # Another caller may have finished first: its wheel has the same bytes, so either one serves.
  mv -T "$stage" "$dir" 2>/dev/null || [ -f "$wheel" ]
fi
echo "$wheel"
