#!/usr/bin/env bash
# On the real GPU host: site.yml with the sglang_server role over the GPU stand-in (--tp 2: two
# rank processes, each holding memory on its GPU, one NCCL all-reduce per generated token; --tp 1
# on a one-GPU host).
#   1. a foreign process holds GPU memory: preflight must refuse and name its PID
#   2. the foreign process gone: start, health gate, a few generations, nvidia-smi while serving;
#      then the no-op run (the fast path) timed against Ansible's floor, and a hand edit repaired
#   4. a new configuration whose ranks crash: site.yml rolls the serving host back to the running one
#   3. stop: the module waits until the ranks' GPU memory is free; nvidia-smi afterwards
# Everything lands in $OUT (summary.txt plus logs.tgz). Needs .whl (ansible-core) and .gpuwheels
# (the stand-in wheel and idna, built here: the host has no network).
set -uo pipefail
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/lib.sh"
# The inventory's runtime_env_ptxas: a logging wrapper in front of the toolkit's ptxas.
ptxas_wrapper /tmp/ptxas-calls.log "ptxas-logged -> /usr/local/cuda-13.0/bin/ptxas "
# No network there: without logrotate the role must not try to install it.
if [ -x /usr/sbin/logrotate ]; then export HAVE_LOGROTATE=true; else export HAVE_LOGROTATE=false; fi
smi() { nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader; }
mkdir -p /srv/models/standin && echo '{"architectures": ["StandInForCausalLM"]}' >/srv/models/standin/config.json
# On a one-GPU host (the 1x H200 kind) the server runs one rank: --tp 1.
gpus=$(nvidia-smi -L | wc -l)
tp_args=()
[ "$gpus" -lt 2 ] && tp_args=(-e '{"sglang_server_args": ["--tp", "1", "--cuda-graph-max-bs", "128"]}')
play() {  # $1 = log name, rest = extra ansible-playbook args
  local name=$1; shift
  local start=$SECONDS
  ansible-playbook -i tests/gpu/inventory.yml -e @tests/gpu/sglang.yml "${tp_args[@]}" site.yml -l blackwell "$@" >"$out/$name.log" 2>&1
  local rc=$?
  say "$name: rc=$rc in $((SECONDS - start)) s; $(grep -A1 'PLAY RECAP' "$out/$name.log" | tail -n1 | tr -s ' ')"
  return $rc
}
fast_path() {  # the fast path's verdict in a run's log: which nodes are converged, why the others are not
  sed -n '/nodes have nothing to do/,/^$/p' "$1" | tail -n +3 | tr -s ' ' | tr '\n' ' '
}
say "logrotate: $HAVE_LOGROTATE, setpriv: $(command -v setpriv)"
say "host: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | tr -s ' '), PID 1 = $(cat /proc/1/comm)"

# 1. A foreign process holds 4 GiB on GPU 0.
/opt/torch/.venv/bin/python -c 'import torch, time; x = torch.empty(4 << 30, dtype=torch.uint8, device="cuda:0"); print("held", flush=True); time.sleep(900)' >"$out/foreign.log" 2>&1 &
foreign=$!
for _ in $(seq 60); do grep -q held "$out/foreign.log" && break; sleep 1; done
say "foreign process PID $foreign: $(smi | tr '\n' ' ')"
play 1-preflight-refuses
say "  preflight message: $(grep -o "PID ${foreign}[^\"]*" "$out/1-preflight-refuses.log" | head -n1)"
kill "$foreign"; wait "$foreign" 2>/dev/null

# 2. Start, gate, serve.
play 2-start
grep -E "ready|startup_seconds|port_open_seconds|completion_tokens|served_model" "$out/2-start.log" | head -n 12 | sed 's/^/  /' | tee -a "$summary"
say "  GPU processes while serving: $(smi | tr '\n' ' ')"
for _ in 1 2 3; do
  curl -s -m 30 http://127.0.0.1:30000/generate -H 'Content-Type: application/json' \
    -d '{"text": "The capital of France is", "sampling_params": {"max_new_tokens": 16, "temperature": 0}}' >>"$out/generate.json"
  echo >>"$out/generate.json"
done
say "  generations: $(grep -c completion_tokens "$out/generate.json") answered"
grep -h "NCCL_\|TRITON_PTXAS_PATH\|CUDA_HOME" /var/log/sglang/*.log | head -n 6 | sed 's/^/  rank env: /' | tee -a "$summary"
play 2b-started-again
say "  second run changed: $(grep -c 'changed:' "$out/2b-started-again.log") changed task lines"
say "  $(fast_path "$out/2b-started-again.log")"
say "  role tasks run: $(grep -c '^TASK \[inferops.gpu\.' "$out/2b-started-again.log")"
# The no-op site.yml (the fast path) against Ansible's floor (facts plus ten stat tasks), interleaved.
noop=() floor=()
for _ in 1 2 3 4 5; do
  t0=$(date +%s.%N); ansible-playbook -i tests/gpu/inventory.yml -l blackwell bench/floor.yml >>"$out/floor.log" 2>&1; t1=$(date +%s.%N)
  ansible-playbook -i tests/gpu/inventory.yml -e @tests/gpu/sglang.yml "${tp_args[@]}" site.yml -l blackwell >>"$out/noop.log" 2>&1; t2=$(date +%s.%N)
  floor+=("$(python3 -c "print(round($t1 - $t0, 2))")") noop+=("$(python3 -c "print(round($t2 - $t1, 2))")")
done
say "  floor runs (s): ${floor[*]}"
say "  no-op site.yml runs (s): ${noop[*]}"
say "  no-op recaps: $(grep -A1 'PLAY RECAP' "$out/noop.log" | grep -v 'PLAY RECAP\|^--' | tr -s ' ' | sort | uniq -c | tr '\n' ' ')"

# 2c. A hand edit of a managed file: the fast path sees it, the roles put the file back.
echo "HAND_EDIT=1" >>/etc/inferops/runtime-env.env
play 2c-drift
say "  $(fast_path "$out/2c-drift.log")"
say "  hand edit left after the run: $(grep -c HAND_EDIT /etc/inferops/runtime-env.env)"
play 2d-after-drift
say "  role tasks run: $(grep -c '^TASK \[inferops.gpu\.' "$out/2d-after-drift.log")"
say "  files before the roll: $(stat -c '%n %U:%G %a' /etc/inferops/runtime-env.json /etc/inferops/runtime-env.env /etc/sglang/sglang-server.env /var/log/sglang/revision | tr '\n' ' ')"

# 4. A new configuration whose ranks crash on the GPUs: the host serves, so site.yml rolls it: the
#    start fails naming rank_crash, the rollback puts the kept files back and restarts the previous
#    server behind the health gate, and the roll stops naming who is where.
play 4-rank-crash -e '{"sglang_server_extra_environment": {"SGLANG_STANDIN_GPU": "1", "SGLANG_STANDIN_FAULT": "rank_crash"}}'
say "  cause: $(grep -oE 'cause: rank_crash|\(cause: [a-z_]+\)' "$out/4-rank-crash.log" | head -n1)"
say "  $(grep -oE '(failed and was rolled back|upgraded: )[^\"]*' "$out/4-rank-crash.log" | tail -n2 | tr '\n' ' ')"
say "  after the rollback: $(stat -c '%n %U:%G %a' /etc/inferops/runtime-env.json /etc/inferops/runtime-env.env /etc/sglang/sglang-server.env /var/log/sglang/revision | tr '\n' ' ')"
say "  serving again: /health_generate $(curl -s -o /dev/null -w '%{http_code}' -m 30 http://127.0.0.1:30000/health_generate); GPU processes: [$(smi | tr '\n' ' ')]"

# 3. Stop: the module returns only when the ranks' GPU memory is free.
play 3-stop -e sglang_server_state=stopped
say "  GPU processes after stop: [$(smi | tr '\n' ' ')]"

cp /var/log/sglang/*.log "$out/" 2>/dev/null
(cd "$out" && tar czf logs.tgz ./*.log ./*.json && rm -f ./*.log ./*.json)
