#!/usr/bin/env bash
# On the real GPU host (issue 42): what the release's Python really sees, and what was set by hand, with the
# host's own CUDA 13.0, torch venv and distro sitecustomize.py. site.yml up to runtime_env (tests/gpu/nccl_decode.yml)
# against tests/gpu/inventory.yml, then:
#   1. clean: the check play's search finds nothing to refuse; after rendering, the release's Python sees the spec
#      and the loader takes libcudart.so.13 from the toolkit (the module's answer, libnccl.so.2's file too);
#   2. the by-hand upgrade's line appended to the distro's sitecustomize.py: refused in the check play, file and line;
#   3. the same line hidden from a reading (exec): refused after rendering, variable, both values, file and line;
#   4. a server started by hand with nohup from a venv, on the server's port: refused in the check play with its PID,
#      venv and log;
#   5. the by-hand lines and an ld.so.conf.d file registering another NCCL, taken over with -e inferops_adopt=true
#      (runtime_env_adopt on the distro's real sitecustomize.py): what was done, the file after, undo.sh;
#   6. a server started by hand holding 2 GiB of one GPU and the port, replaced through the sglang_server module's
#      option replace (process manager, the stand-in in GPU mode): its drain, its GPU memory released, the new server
#      gated.
# STEPS names the steps to run (default: all; 1 always runs, it provisions). The sitecustomize.py is put back after
# each step. Everything lands in $OUT (summary.txt, logs.tgz).
set -uo pipefail
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/lib.sh"
ptxas_wrapper /tmp/ptxas-calls.log "ptxas-logged -> /usr/local/cuda-13.0/bin/ptxas "
mkdir -p /srv/models/standin && echo '{"architectures": ["StandInForCausalLM"]}' >/srv/models/standin/config.json
# The check play holds --tp against the GPUs (issue 41): one rank on a one-GPU host.
tp_args=()
[ "$(nvidia-smi -L | wc -l)" -lt 2 ] && tp_args=(-e '{"sglang_server_args": ["--tp", "1"]}')
steps=" ${STEPS:-1 2 3 4 5 6} "
want() { [[ "$steps" == *" $1 "* ]]; }
site() {  # $1 = log name, then more arguments of ansible-playbook
  local start=$SECONDS name=$1
  shift
  timeout -k 10 400 ansible-playbook -i tests/gpu/inventory.yml -e @tests/gpu/nccl_decode.yml "${tp_args[@]}" \
    -e inferops_fast_path=false "$@" site.yml -l blackwell -v >"$out/$name.log" 2>&1
  local rc=$?
  say "$name: rc=$rc in $((SECONDS - start)) s; $(grep -A1 'PLAY RECAP' "$out/$name.log" | tail -n1 | tr -s ' ')"
}
msg() {  # the failure's message in a log, on one line
  grep -o "$2[^\"]*" "$out/$1.log" | head -n1 | cut -c1-600
}
distro=$(/usr/bin/python3 -c 'import sitecustomize; print(sitecustomize.__file__)' 2>/dev/null)
say "host: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | tr -s ' '); distro sitecustomize: ${distro:-none}"
[ -n "$distro" ] && cp "$distro" /tmp/sitecustomize.orig && lines=$(wc -l <"$distro")

site 1-clean
grep -E "sees the spec|given by hand|\[WARNING\]" "$out/1-clean.log" | sort -u | head -n 12 | sed 's/^/  /' | tee -a "$summary"
PYTHONPATH=/tmp/site ansible localhost -c local -e ansible_python_interpreter=/opt/torch/.venv/bin/python3 \
  -m inferops.gpu.runtime_env_effective -a '{"python": "/opt/ml-env/bin/python", "environment_files": ["/etc/inferops/runtime-env.env"], "libraries": {"libcudart.so.13": ["/usr/local/cuda-13.0"], "libnccl.so.2": []}, "expected": {}}' \
  >"$out/1-effective.log" 2>&1
say "  module's libraries: $(grep -A8 '"libraries"' "$out/1-effective.log" | tr -s ' \n' ' ' | cut -c1-400)"

if [ -n "$distro" ] && want 2; then
  printf 'import os\nos.environ["CUDA_HOME"] = "/usr/local/cuda-12.8"\n' >>"$distro"
  site 2-hand-sitecustomize
  say "  refusal: $(msg 2-hand-sitecustomize 'set by hand on this host')"
  cp /tmp/sitecustomize.orig "$distro"
  printf 'import os\nexec(%s)\n' "'os.environ[\"CUDA_HOME\"] = \"/usr/local/cuda-12.8\"'" >>"$distro"
  site 3-hidden-assignment
  say "  refusal: $(msg 3-hidden-assignment 'CUDA_HOME: the release')"
  cp /tmp/sitecustomize.orig "$distro"
  say "  expected line of both: $((lines + 2))"
fi

if want 4; then
python3 -m venv --without-pip /tmp/hand-env && mkdir -p /data/logs
(cd /data && nohup /tmp/hand-env/bin/python -c 'import socket, time; s = socket.socket(); s.bind(("0.0.0.0", 30000)); s.listen(); time.sleep(600)' \
  -m sglang.launch_server --port 30000 --api-key s3cr3t >/data/logs/sglang.log 2>&1 &)
sleep 2
site 4-hand-server
say "  refusal: $(msg 4-hand-server 'an SGLang server the collection does not run')"
pkill -f 'hand-env/bin/python' || true
fi

if [ -n "$distro" ] && want 5; then
  printf 'import os\nos.environ["CUDA_HOME"] = "/usr/local/cuda-12.8"\nos.environ["NCCL_PROTO"] = "LL"\n' >>"$distro"
  mkdir -p /usr/local/cuda-12.8/lib64
  objects=(/usr/lib/python3*/lib-dynload/*.so)
  cp "${objects[0]}" /usr/local/cuda-12.8/lib64/libnccl.so.2
  echo /usr/local/cuda-12.8/lib64 >/etc/ld.so.conf.d/cuda-12-8.conf && ldconfig
  say "  loader before: $(ldconfig -p | grep -m2 'libnccl.so.2 ' | tr -s ' \n' ' ')"
  site 5-adopt -e inferops_adopt=true
  grep -E "taken over by this run|edited |moved aside |backup /" "$out/5-adopt.log" | sort -u | head -n 12 | sed 's/^ */  /' | tee -a "$summary"
  records=(/var/backups/inferops-adopt/*/)
  record=${records[-1]}
  say "  record: $(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print([(e["path"], [c["line"] for c in e["changes"]]) for e in r["edited"]], [m["path"] for m in r["moved"]])' "$record/adoption.json" 2>&1)"
  say "  after: $(tail -n 3 "$distro" | tr '\n' '|'); the distro's lines kept: $(head -n "$lines" "$distro" | cmp -s - /tmp/sitecustomize.orig && echo yes || echo NO)"
  say "  loader after: $(ldconfig -p | grep -m2 'libnccl.so.2 ' | tr -s ' \n' ' ')"
  site 5-adopt-again -e inferops_adopt=true
  sh "$record/undo.sh" && head -n "$lines" "$distro" >/dev/null
  say "  undo.sh: sitecustomize.py as before the run: $(tail -n 2 "$distro" | tr '\n' '|'); the loader file back: $(ls /etc/ld.so.conf.d/cuda-12-8.conf)"
  cp /tmp/sitecustomize.orig "$distro" && rm -f /etc/ld.so.conf.d/cuda-12-8.conf && ldconfig
fi

if want 6; then
  mkdir -p /data/logs /tmp/sg
  cat >/tmp/hand_gpu.py <<'PY'
import signal, socket, sys, time
import torch
held = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")  # 2 GiB of GPU 0, as a server's weights
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 30000)); s.listen()
def drain(*_):
    time.sleep(1); print("drained", flush=True); sys.exit(0)
signal.signal(signal.SIGTERM, drain)
print("ready", flush=True); time.sleep(900)
PY
  (cd /data && nohup /opt/torch/.venv/bin/python /tmp/hand_gpu.py -m sglang.launch_server --port 30000 >/data/logs/hand-gpu.log 2>&1 &)
  for _ in $(seq 60); do grep -q ready /data/logs/hand-gpu.log 2>/dev/null && break; sleep 1; done
  say "6. hand server on the GPU: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ' ')"
  export ANSIBLE_COLLECTIONS_PATH=$PWD/.collections
  ansible localhost -o -m inferops.gpu.sglang_foreign -a '{"port": 30000, "adopt": true}' >"$out/6-foreign.log" 2>&1
  replace=$(python3 -c 'import json, re, sys; t = open(sys.argv[1]).read(); print(json.dumps(json.loads(t[t.index("{"):])["in_the_way"]))' "$out/6-foreign.log")
  say "  found: $replace; $(grep -o 'adopted, it is stopped[^"]*' "$out/6-foreign.log" | head -n1)"
  args=$(printf '{"manager": "process", "log_path": "/tmp/sg/server.log", "port": 30000, "timeout": 300, "stall_timeout": 120, "state": "started",
    "command": ["/opt/torch/.venv/bin/python", "-m", "sglang.launch_server", "--model-path", "/srv/models/standin", "--tp", "1", "--port", "30000"],
    "environment": {"PYTHONPATH": "%s/tests/fixtures/sglang_standin", "SGLANG_STANDIN_GPU": "1"}, "replace": %s}' "$PWD" "$replace")
  start=$SECONDS
  ansible localhost -o -m inferops.gpu.sglang_server -a "$args" >"$out/6-replace.log" 2>&1
  say "  sglang_server replace: rc=$? in $((SECONDS - start)) s; $(grep -oE '"(ready|replaced|stopped_before|startup_seconds)": [^,]*' "$out/6-replace.log" | tr '\n' ' ')"
  say "  hand server's log: $(tr '\n' ' ' </data/logs/hand-gpu.log)"
  say "  GPU now: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ' ')"
  ansible localhost -o -m inferops.gpu.sglang_server -a "${args/\"started\"/\"stopped\"}" >"$out/6-stop.log" 2>&1
  say "  stopped: $(grep -oE '"stopped_pids": [^]]*]' "$out/6-stop.log")"
  pkill -f 'hand_gpu.py' || true
fi

(cd "$out" && tar czf logs.tgz ./*.log && rm -f ./*.log)
