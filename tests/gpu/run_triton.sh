#!/usr/bin/env bash
# On the real GPU host (issue 28): which ptxas torch's Triton runs for sm_90 and sm_120, through
# site.yml (cuda_toolkit existing, ml_env host-torch, runtime_env and its Triton proof) with
# tests/gpu/inventory.yml, whose runtime_env_ptxas is a logging wrapper in front of CUDA 13.0's ptxas:
#   with      the spec as the role renders it (TRITON_PTXAS_BLACKWELL_PATH too): the role's proof
#             passes for sm_90 and sm_120, and the wrapper logs a call for each (--gpu-name=sm_90a, sm_120a)
#   without   runtime_env_ptxas_blackwell empty: the proof must fail naming sm_120, and the wrapper
#             logs no sm_120a call (Triton ran its bundled ptxas-blackwell)
#   run       a kernel compiled and run on the GPU (sm_90) by the venv's Triton through the hook
#   restore   site.yml once more as in `with`
#   nccl      gpu_health's NCCL smoke test over every GPU of the host: the NCCL release it ran (nccl.json)
# Writes $OUT/summary.txt, proof-<step>.json (the triton_ptxas result) and logs.tgz. Needs .whl (make gpu-wheels).
set -uo pipefail
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/lib.sh"
calls=/tmp/ptxas-calls.log
ptxas_wrapper "$calls"

# $1 = step; the rest go to ansible-playbook (site-<step>.log). Then the module once more, ad hoc,
# for its whole result (proof-<step>.json): the host has no ansible.posix, so no json callback.
site() {
  local step=$1 rc
  shift
  rm -f "$calls"
  timeout -k 10 240 ansible-playbook -i tests/gpu/inventory.yml -e @tests/gpu/nccl_decode.yml -e inferops_fast_path=false \
    -e '{"sglang_server_preflight_ignore": ["gpu_count"]}' site.yml -l blackwell "$@" >"$out/site-$step.log" 2>&1
  rc=$?
  say "site.yml ($step): rc=$rc; $(grep -A1 'PLAY RECAP' "$out/site-$step.log" | tail -n1 | tr -s ' ')"
  say "  its failure: $(grep -m1 -oE 'does not assemble with the toolkit.{0,700}' "$out/site-$step.log")"
  say "  ptxas wrapper calls ($step): $(grep -oE -- '--gpu-name=sm_[0-9]+a?' "$calls" 2>/dev/null | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
  ANSIBLE_CALLBACK_RESULT_FORMAT=json timeout -k 10 120 ansible localhost -c local -e ansible_python_interpreter=/usr/bin/python3 \
    -m inferops.gpu.triton_ptxas -a '{"python": "/opt/ml-env/bin/python", "ptxas": "/usr/local/bin/ptxas-logged", "archs": ["sm_90", "sm_120"]}' \
    >"$out/proof-$step.txt" 2>&1
  python3 - "$out/proof-$step.txt" "$out/proof-$step.json" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
result = json.loads(text[text.index("=> {") + 3:]) if "=> {" in text else {"output": text[-2000:]}
json.dump(result, open(sys.argv[2], "w"), indent=1)
print("  module: %s %s" % (result.get("msg", "")[:500], [(a["arch"], a["ptxas_release"], a["ptx_version"], a["ok"]) for a in result.get("archs", [])]))
PY
}

say "host: $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tr '\n' ' ')"
say "host env: $(env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST)=' | tr '\n' ' ')"
say "triton: $(/opt/torch/.venv/bin/python -c 'import triton, torch; print(triton.__version__, torch.__version__)')"

site with
cp /etc/inferops/runtime-env.json "$out/runtime-env-with.json" 2>/dev/null
site without -e runtime_env_ptxas_blackwell=
rm -f "$calls"
timeout -k 10 300 env -u TRITON_PTXAS_PATH -u TRITON_PTXAS_BLACKWELL_PATH -u PYTHONPATH /opt/ml-env/bin/python \
  tests/gpu/triton_ptxas.py >"$out/run.log" 2>&1
say "run on the GPU: rc=$? $(tail -n 1 "$out/run.log"); wrapper calls: $(grep -oE -- '--gpu-name=sm_[0-9]+a?' "$calls" 2>/dev/null | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
site restore
ANSIBLE_CALLBACK_RESULT_FORMAT=json ansible localhost -c local -m inferops.gpu.gpu_health -e ansible_python_interpreter=/opt/torch/.venv/bin/python3 \
  -a '{"checks": ["nccl"], "require": ["nccl"], "ml_env_python": "/opt/torch/.venv/bin/python3"}' >"$out/nccl.log" 2>&1
say "gpu_health nccl: rc=$? $(grep -oE '"(nccl_version|summary|msg)": "[^"]*"' "$out/nccl.log" | head -n 3 | tr '\n' ' ')"
(cd "$out" && tar czf logs.tgz nccl.log site-*.log proof-*.txt run.log && rm -f nccl.log site-*.log proof-*.txt run.log)
