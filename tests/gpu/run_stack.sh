#!/usr/bin/env bash
# On the real GPU host: site.yml (cuda_toolkit existing, ml_env host-torch, runtime_env) against
# tests/gpu/inventory.yml, then the evidence the roles' issues ask for, all written into $OUT:
#   site-<profile>.log   the playbook per NCCL profile (auto first, then none, pcie_blackwell, nvlink)
#   nccl-env.log         a 2-rank all-reduce with NCCL_DEBUG=INFO from a shell without the spec's vars
#   triton.log           a Triton kernel compiled in a fresh cache + the ptxas wrapper's call log
#   bench.txt            all-reduce bus bandwidth 1 MiB..1 GiB under each profile (bench/nccl_profiles.sh)
set -uo pipefail
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/lib.sh"
ptxas_wrapper /tmp/ptxas-calls.log "ptxas-logged -> /usr/local/cuda-13.0/bin/ptxas "

site() {  # $1 = NCCL profile
  # Up to runtime_env with a model path for the check play (tests/gpu/nccl_decode.yml), and through
  # the roles every time: the profile comes from an env lookup whose text the fast path sees unchanged.
  NCCL_PROFILE=$1 PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH \
    timeout -k 10 300 ansible-playbook -i tests/gpu/inventory.yml -e @tests/gpu/nccl_decode.yml \
    -e inferops_fast_path=false site.yml -l blackwell >"$out/site-$1.log" 2>&1
  echo "site.yml with NCCL profile $1: rc=$? $(grep -A1 'PLAY RECAP' "$out/site-$1.log" | tail -n1)"
}
# The spec's variables are unset here; the platform's NCCL_NVLS_ENABLE=0 and
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1 stay set (and must win).
venv_python() { timeout -k 10 300 env -u CUDA_HOME -u PYTHONPATH /opt/ml-env/bin/python "$@"; }

site auto
cp /opt/ml-env/.ml_env/verify.json "$out/ml_env_verify.json" 2>/dev/null
cp /etc/inferops/runtime-env.json "$out/runtime-env-auto.json" 2>/dev/null
venv_python -c 'import os, json; print(json.dumps({k: os.environ.get(k) for k in ["CUDA_HOME", "TRITON_PTXAS_PATH", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "SGLANG_DISABLE_CUDNN_CHECK"]}))'

site pcie_blackwell
NCCL_DEBUG=INFO venv_python tests/gpu/nccl_allreduce.py >"$out/nccl-env.log" 2>&1
echo "all-reduce rc=$?"; grep -E "set by environment|RESULT" "$out/nccl-env.log" | sort -u | head -20

rm -f /tmp/ptxas-calls.log
venv_python tests/gpu/triton_ptxas.py >"$out/triton.log" 2>&1
echo "triton rc=$?"; cat /tmp/ptxas-calls.log >>"$out/triton.log" 2>/dev/null; tail -n 3 "$out/triton.log"

bash bench/nccl_profiles.sh "$out" none pcie_blackwell nvlink

# At most 8 result files come back from the GPU host: keep the summaries, pack the logs.
(cd "$out" && tar czf logs.tgz ./*.log && rm -f ./*.log)
