#!/usr/bin/env bash
# On the real GPU host (issue 29): what only a real GPU and a real serving node show of the house.
#   1. site.yml serves the SGLang stand-in on the GPUs (tests/gpu/sglang.yml: the service user's own
#      process group, no systemd there; --tp 1 on a one-GPU host) and a foreign process holds 4 GiB on GPU 0
#   2. gpu_health's gpu_clean tells the server's own ranks (its process manager's pid file) from the
#      foreign PID, and names both: before issue 29 it called the server's own rank foreign
#   3. verify.yml (the report module node_info) against the per-host chain it replaced, on this host:
#      the rows and the table must agree. The chain is the one of b4e065f, put beside the playbooks
#      before the run (the device copies the working tree, not git's history):
#        git show b4e065f:playbooks/verify.yml > playbooks/.verify-before.yml
# Writes $OUT/summary.txt, gpu-clean.json, report-new.json, report-old.json and logs.tgz. Needs .whl
# and .gpuwheels (make gpu-wheels).
set -uo pipefail
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/lib.sh"
ptxas_wrapper /tmp/ptxas-calls.log "ptxas-logged -> /usr/local/cuda-13.0/bin/ptxas "
if [ -x /usr/sbin/logrotate ]; then export HAVE_LOGROTATE=true; else export HAVE_LOGROTATE=false; fi
mkdir -p /srv/models/standin && echo '{"architectures": ["StandInForCausalLM"]}' >/srv/models/standin/config.json
gpus=$(nvidia-smi -L | wc -l)
tp_args=()
[ "$gpus" -lt 2 ] && tp_args=(-e '{"sglang_server_args": ["--tp", "1", "--cuda-graph-max-bs", "128"]}')
module_json() {  # $1 = text of an ad-hoc ansible run; prints its result's JSON
  python3 -c 'import json, sys; t = open(sys.argv[1]).read(); print(json.dumps(json.loads(t[t.index("=> {") + 3:]) if "=> {" in t else {"output": t[-2000:]}, indent=1))' "$1"
}

timeout -k 10 480 ansible-playbook -i tests/gpu/inventory.yml -e @tests/gpu/sglang.yml "${tp_args[@]}" site.yml -l blackwell \
  >"$out/site.log" 2>&1
say "1. site.yml: rc=$?; $(grep -A1 'PLAY RECAP' "$out/site.log" | tail -n1 | tr -s ' ')"
/opt/torch/.venv/bin/python -c 'import torch, time; x = torch.empty(4 << 30, dtype=torch.uint8, device="cuda:0"); print("held", flush=True); time.sleep(600)' >"$out/foreign.log" 2>&1 &
foreign=$!
for _ in $(seq 60); do grep -q held "$out/foreign.log" && break; sleep 1; done
say "   GPU processes: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ' '); foreign PID $foreign"

ANSIBLE_CALLBACK_RESULT_FORMAT=json timeout -k 10 120 ansible localhost -c local -e ansible_python_interpreter=/usr/bin/python3 \
  -m inferops.gpu.gpu_health -a '{"checks": ["gpu_clean"], "require": [], "own_pid_files": ["/var/log/sglang/sglang-server.pid"]}' \
  >"$out/gpu-clean.txt" 2>&1
module_json "$out/gpu-clean.txt" >"$out/gpu-clean.json"
python3 - "$out/gpu-clean.json" "$foreign" <<'PY' | tee -a "$summary"
import json, sys
result, foreign = json.load(open(sys.argv[1])), int(sys.argv[2])
check = result.get("checks", {}).get("gpu_clean", {})
value = check.get("value", {})
own = sorted(set(p["pid"] for p in value.get("own", [])))
print("2. gpu_clean: %s; foreign %s; own %s (%s)" % (check.get("summary", result.get("msg", "?")), value.get("foreign"), own,
      ", ".join(sorted(set(p["by"] for p in value.get("own", []))))))
print("   the foreign PID is foreign: %s; a server rank is own: %s" % (foreign in value.get("foreign", []), bool(own)))
PY
kill "$foreign"; wait "$foreign" 2>/dev/null

if [ -f playbooks/.verify-before.yml ]; then
  timeout -k 10 300 ansible-playbook -i tests/gpu/inventory.yml -e @tests/gpu/sglang.yml "${tp_args[@]}" verify.yml -l blackwell \
    -e "verify_report_path=$out/report-new.json" >"$out/verify-new.log" 2>&1
  say "3. verify.yml (node_info): rc=$?"
  timeout -k 10 300 ansible-playbook -i tests/gpu/inventory.yml -e @tests/gpu/sglang.yml "${tp_args[@]}" playbooks/.verify-before.yml \
    -l blackwell -e "verify_report_path=$out/report-old.json" >"$out/verify-old.log" 2>&1
  say "   the chain of b4e065f: rc=$?"
  python3 - "$out/report-new.json" "$out/report-old.json" <<'PY' | tee -a "$summary"
import json, sys
new, old = (json.load(open(p)) for p in sys.argv[1:])
print("   rows agree: %s; tables agree: %s" % (new["hosts"] == old["hosts"], new["table"] == old["table"]))
print("\n".join("   " + line for line in new["table"]))
PY
else
  say "3. skipped: playbooks/.verify-before.yml is missing (see this script's header)"
fi
(cd "$out" && tar czf logs.tgz ./*.log gpu-clean.txt && rm -f ./*.log gpu-clean.txt)
