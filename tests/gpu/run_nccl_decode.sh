#!/usr/bin/env bash
# On the real GPU host: all-reduce at the sizes TP decode uses, and the stand-in's decode loop,
# under each NCCL profile of runtime_env, side by side in one run. Per profile (auto first, then
# none, pcie_blackwell, nvlink): site.yml renders it against tests/gpu/inventory.yml (roles up to
# runtime_env, tests/gpu/nccl_decode.yml), then the
# ml-env venv's python (its start-up hook supplies the spec) runs
#   tests/gpu/nccl_decode.py   bf16 latency at 7168 x batch 1..128, eager and CUDA-graph, busbw 1 MiB..1 GiB
#   tests/gpu/decode_loop.py   the stand-in with --tp <GPUs>, 60 all-reduces of 1 x 7168 bf16 per token
# Everything lands in $OUT (at most 8 files come back): results.txt (`<profile> <json>` lines for
# bench/report_nccl_decode.py), summary.txt, host.txt, logs.tgz. It stops starting work when
# fewer than BUDGET_S (default 390) seconds are left since its start, so a 420 s call still
# brings back what it measured. Never touches the platform's NCCL_NVLS_ENABLE=0 and
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1.
set -uo pipefail
out=${OUT:-/tmp/gpu-out}
budget=${BUDGET_S:-390}
profiles=${PROFILES:-auto none pcie_blackwell nvlink}
logs=$out/logs
mkdir -p "$logs"
results=$out/results.txt summary=$out/summary.txt
: >"$results"
: >"$summary"
exec {xfd}>>"$logs/trace.log"
BASH_XTRACEFD=$xfd
set -x

left() { echo $((budget - SECONDS)); }
# A step's limit: its own cap, or what is left of the budget less a margin for packing up.
limit() { local cap=$1 rest=$(($(left) - 15)); echo $((rest < cap ? rest : cap)); }
pack() { (cd "$out" && tar czf logs.tgz logs && rm -rf logs); }
trap pack EXIT

# The spec's variables are unset here; the platform's NCCL_NVLS_ENABLE=0 and
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1 stay set (and must win).
# An array, not a function: `timeout` runs commands, and kills the whole group (mp.spawn's ranks too).
venv_python=(env -u CUDA_HOME -u PYTHONPATH PYTHONUNBUFFERED=1 "${ML_ENV_PYTHON:-/opt/ml-env/bin/python}")

# The carried wheels (lib.sh exits on a failed install), and the inventory's runtime_env_ptxas: a
# logging wrapper in front of the toolkit's ptxas. say() is lib.sh's with the time in front.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/lib.sh"
say() { echo "[$SECONDS s] $*" | tee -a "$summary"; }
ptxas_wrapper /tmp/ptxas-calls.log "ptxas-logged -> /usr/local/cuda-13.0/bin/ptxas "

gpus=$(nvidia-smi -L | grep -c '^GPU ')
{
  echo "gpus: $gpus"
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvidia-smi topo -m
  echo "platform: NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-<unset>} TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST-<unset>} NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS-<unset>}"
  echo "kernel: $(uname -r); date: $(date -u +%Y-%m-%dT%H:%MZ)"
} >"$out/host.txt" 2>&1
say "host: $gpus GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
[ "$gpus" -lt 2 ] && say "one GPU: every all-reduce has a single rank; nothing here measures an interconnect"

site() {  # $1 = NCCL profile; renders it (and provisions the host the first time)
  # Through the roles every time: the profile comes from an env lookup, whose text (all the fast
  # path's digest sees) is the same for every profile.
  local t0=$SECONDS
  NCCL_PROFILE=$1 PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH \
    timeout -k 10 "$(limit 200)" ansible-playbook -i tests/gpu/inventory.yml -e @tests/gpu/nccl_decode.yml site.yml \
    -l blackwell -e inferops_fast_path=false >"$logs/site-$1.log" 2>&1
  local rc=$?
  say "site.yml with NCCL profile $1: rc=$rc in $((SECONDS - t0)) s; $(grep -A1 'PLAY RECAP' "$logs/site-$1.log" | tail -n1 | tr -s ' ')"
  say "  $(grep -oE '[0-9]+ GPU\(s\), topology [a-z]+, NCCL profile [A-Za-z0-9_.-]+' "$logs/site-$1.log" | tail -n1)"
  cp /etc/inferops/runtime-env.json "$logs/runtime-env-$1.json" 2>/dev/null
  [ "$rc" -eq 0 ] || grep -m1 -A4 'fatal:' "$logs/site-$1.log" | cut -c1-200 | sed 's/^/    /' | tee -a "$summary"
  [ "$rc" -eq 0 ] || return $rc
  # The profile asked for must be the one rendered, or every figure would be of another.
  [ "$1" = auto ] || grep -qE "GPU\(s\), topology [a-z]+, NCCL profile $1\b" "$logs/site-$1.log" || { say "  profile $1: not the one site.yml rendered"; return 1; }
  return 0
}

measure() {  # $1 = profile, $2 = log name, rest = script and its arguments
  local profile=$1 name=$2 t0=$SECONDS cap
  shift 2
  cap=$(limit 120)
  [ "$cap" -ge 20 ] || { say "  $name: skipped, $(left) s left"; return 1; }
  # NCCL_DEBUG: NCCL itself logs `NCCL_X set by environment to Y` for each variable it takes
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV timeout -k 10 "$cap" "${venv_python[@]}" "$@" --profile "$profile" \
    >"$logs/$name-$profile.log" 2>&1
  local rc=$?
  grep '^RESULT ' "$logs/$name-$profile.log" | sed "s/^RESULT /$profile /" >>"$results"
  say "  $name: rc=$rc in $((SECONDS - t0)) s, $(grep -c '^RESULT ' "$logs/$name-$profile.log") result lines"
}

for p in $profiles; do
  if [ "$(left)" -lt 90 ]; then say "profile $p: skipped, only $(left) s of the budget left"; continue; fi
  site "$p" || { say "profile $p: not measured (site.yml failed)"; continue; }
  measure "$p" nccl_decode tests/gpu/nccl_decode.py
  grep -h 'set by environment' "$logs/nccl_decode-$p.log" | sed 's/.*NCCL INFO //' | sort -u | head -n 12 | sed 's/^/    /' | tee -a "$summary"
  measure "$p" decode_loop tests/gpu/decode_loop.py --tp "$gpus" --layers 60 --hidden 7168 --tokens 64 --requests 10 \
    --log "$logs/standin-$p.log"
done
# The stand-in's GPU unit test (tests/unit/standin, skipped where torch sees no GPU), if time is left.
if [ "$(left)" -ge 45 ]; then
  timeout -k 10 "$(limit 60)" python3 -m pytest -p no:cacheprovider --import-mode=importlib tests/unit/standin \
    -k 'gpu_mode_holds_memory' -q >"$logs/pytest-gpu.log" 2>&1
  say "stand-in GPU unit test: rc=$? $(tail -n1 "$logs/pytest-gpu.log")"
fi
say "GPU processes left: [$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ' ')]"
say "done: $(wc -l <"$results") result lines"
