#!/usr/bin/env bash
# `make parser-proof` (not part of `make test`: each release's venv holds torch, about 4 GB): the argument
# check (plugins/module_utils/sglang/arg_check.py) against the real sglang of every supported release,
# in an interpreter that imports it as a release does (torch included), launching nothing, no GPU needed.
#   1. .build/venv-sglang-VERSION from tools/requirements-sglang-VERSION.txt (tools/venv.sh: built once,
#      reused while the lock is unchanged);
#   2. tests/sglang_parser/: the stand-in's parser has exactly the real parser's options (names and how
#      many values each takes: abbreviations and ambiguities depend on the whole set), and the probe gives
#      the same verdict on the same words in the real release and in the stand-in.
# --write-standin: rewrite the stand-in's option table (tests/fixtures/sglang_standin/sglang/standin/
# real_options.py) from the real parsers instead of step 2's comparison, after a release moved.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$SECONDS
pythons=()
for lock in tools/requirements-sglang-*.txt; do
  version=${lock#tools/requirements-sglang-}
  version=${version%.txt}
  tools/venv.sh "sglang-$version" "$lock"
  pythons+=("$version=$root/.build/venv-sglang-$version/bin/python")
done
export SGLANG_PARSER_PYTHONS="${pythons[*]}"
if [ "${1:-}" = --write-standin ]; then
  python tests/sglang_parser/real_options.py --write
else
  python -m pytest -p no:cacheprovider --import-mode=importlib -q tests/sglang_parser
fi
echo "sglang-parser-proof: done in $((SECONDS - start)) s (${pythons[*]})"
