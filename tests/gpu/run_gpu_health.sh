#!/usr/bin/env bash
# On the real GPU host (2x H200): the gpu_health module through tests/gpu/gpu_health.yml.
#   all     every check and the NCCL smoke test, through the role, all required
#   clean   a foreign process holds 4 GiB on GPU 1: the clean check must name its PID
#   hang    rank 1 of the smoke test is stopped (SIGSTOP) as soon as it exists, so it never joins:
#           the module must cut the run at its 20 s deadline, name the cause, leave no process
#   p2poff  the smoke test with NCCL_P2P_DISABLE=1, the diagnostic the hang message names
# Writes $OUT/summary.txt and one JSON per step. Needs .whl (ansible-core wheels).
set -uo pipefail
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/lib.sh"
export GPU_DUMP_DIR=$out
smi() { nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader; }
# The pattern does not match its own text, so grep never lists itself.
ranks() { grep -lE 'nccl-smoke-[a-z0-9_]+/' /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3; }
step() {  # $1 = tag; GPU_STEP, when set, names the step's files instead
  local start end rc name=${GPU_STEP:-$1}
  start=$(date +%s.%N)
  ansible-playbook tests/gpu/gpu_health.yml --tags "$1" >"$out/$name.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  say "$name: rc=$rc in $(python3 -c "print(round($end - $start, 1))") s; $(grep -A1 'PLAY RECAP' "$out/$1.log" | tail -n1 | tr -s ' ')"
}
say "host: $(nvidia-smi --query-gpu=name,pci.bus_id --format=csv,noheader | tr '\n' ' '); driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1)"
say "host env: $(env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST)=' | tr '\n' ' ')"

step all
step clean-before
/opt/torch/.venv/bin/python3 -c 'import torch, time; x = torch.empty(4 << 30, dtype=torch.uint8, device="cuda:1"); print("held", flush=True); time.sleep(600)' >"$out/foreign.log" 2>&1 &
foreign=$!
for _ in $(seq 60); do grep -q held "$out/foreign.log" && break; sleep 1; done
say "foreign process PID $foreign: $(smi | tr '\n' ' ')"
step clean
kill "$foreign"; wait "$foreign" 2>/dev/null
for _ in $(seq 30); do [ -z "$(smi)" ] && break; sleep 1; done

# Rank 1 stopped (SIGSTOP), so it never joins: $1 = hang (the moment it exists: rank 0 waits in the
# rendezvous) or hang-late (once it printed "SMOKE phase allreduce": rank 0 waits inside NCCL).
stop_rank1() {
  for _ in $(seq 600); do
    for pid in $(ranks); do
      tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'RANK=1' || continue
      if [ "$1" = hang-late ]; then
        grep -q 'SMOKE phase allreduce' "$(readlink "/proc/$pid/fd/1")" 2>/dev/null || continue
      fi
      kill -STOP "$pid" && echo "$1: stopped rank 1, PID $pid" >"$out/stopper-$1.log"; return 0
    done
    sleep 0.02
  done
}
for variant in hang hang-late; do
  stop_rank1 "$variant" &
  stopper=$!
  GPU_STEP=$variant step hang
  wait "$stopper" 2>/dev/null
  say "  $(cat "$out/stopper-$variant.log" 2>/dev/null || echo "$variant: rank 1 never seen")"
  say "  rank processes left: [$(ranks | tr '\n' ' ')]; GPU processes left: [$(smi | tr '\n' ' ')]"
done
step p2poff
python3 - "$out" <<'PY' | tee -a "$summary"
import json, os, sys
out = sys.argv[1]
def load(name):
    path = os.path.join(out, name + '.json')
    return json.load(open(path)) if os.path.exists(path) else None
for name in ('all', 'check_mode', 'clean', 'hang', 'hang-late', 'p2poff'):
    r = load(name)
    if r is None:
        print('%s: no result' % name); continue
    print('%s: healthy=%s problems=%s' % (name, r.get('healthy'), json.dumps(r.get('problems'))[:600]))
    for check, c in sorted(r.get('checks', {}).items()):
        v = c.get('value') or {}
        extra = ''
        if check == 'nccl':
            extra = ' seconds=%s busbw_gbps=%s sum=%s/%s outcome=%s' % (v.get('seconds'), v.get('busbw_gbps'), v.get('sum'), v.get('expected'), v.get('outcome'))
        print('  %s: %s - %s%s' % (check, c['status'], c['summary'][:200], extra))
    if name.startswith('hang'):
        print('  log tail: %s' % json.dumps((r['checks']['nccl']['value'] or {}).get('log_tail', [])[-4:])[:800])
PY
