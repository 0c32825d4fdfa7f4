#!/usr/bin/env bash
# `make triton` (part of `make test`): the runtime_env role's Triton proof against real Triton and
# real CUDA 13 ptxas, no GPU needed (tests/triton/). The venv .build/venv-triton holds the wheels
# pinned in tools/requirements-triton.txt (tools/venv.sh: built once, ~230 MB downloaded, reused
# while the lock is unchanged); the test then runs the role's spec, hook and verify tasks with and
# without TRITON_PTXAS_BLACKWELL_PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$SECONDS
tools/venv.sh triton
TRITON_VENV=$root/.build/venv-triton python -m pytest -p no:cacheprovider --import-mode=importlib -q tests/triton
echo "triton-proof: passed in $((SECONDS - start)) s"
