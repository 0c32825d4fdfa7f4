#!/usr/bin/env bash
# All-reduce bus bandwidth (1 MiB .. 1 GiB) under each NCCL profile of runtime_env, side by side in
# one run on one GPU host: site.yml renders the profile, the ml-env venv's python (its start-up
# hook supplies the spec) measures. Run from the repo root on the GPU host, after run_stack.sh's
# setup (ansible-core in /tmp/site). Writes <out>/bench.txt; bench/report_nccl.py turns it into
# docs/benchmarks.md. Through the roles each time (the profile comes from an env lookup, whose
# text the fast path's digest sees as unchanged), up to runtime_env (tests/gpu/nccl_decode.yml).
set -uo pipefail
out=${1:?usage: $0 OUT_DIR [PROFILE...]}
shift
[ $# -gt 0 ] || set -- none pcie_blackwell nvlink
: >"$out/bench.txt"
for p in "$@"; do
  NCCL_PROFILE=$p PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH \
    timeout -k 10 300 ansible-playbook -i tests/gpu/inventory.yml -e @tests/gpu/nccl_decode.yml -e inferops_fast_path=false site.yml \
    -l blackwell >"$out/site-$p.log" 2>&1 || { echo "site.yml failed for $p"; continue; }
  timeout -k 10 300 env -u CUDA_HOME -u PYTHONPATH /opt/ml-env/bin/python tests/gpu/nccl_allreduce.py --bench >"$out/bench-$p.log" 2>&1
  grep RESULT "$out/bench-$p.log" | sed "s/^RESULT /$p /" >>"$out/bench.txt"
done
cat "$out/bench.txt"
