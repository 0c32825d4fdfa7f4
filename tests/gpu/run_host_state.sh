#!/usr/bin/env bash
# On the real GPU host (issue 42): what the release's Python really sees, and what was set by hand, with the
# host's own CUDA 13.0, torch venv and distro sitecustomize.py. site.yml up to runtime_env (tests/gpu/nccl_decode.yml)
# against tests/gpu/inventory.yml, then:
#   1. clean: the check play's search finds nothing to refuse; after rendering, the release's Python sees the spec
#      and the loader takes libcudart.so.13 from the toolkit (the module's answer, libnccl.so.2's file too);
#   2. the by-hand upgrade's line appended to the distro's sitecustomize.py: refused in the check play, file and line;
#   3. the same line hidden from a reading (exec): refused after rendering, variable, both values, file and line;
#   4. a server started by hand with nohup from a venv, on the server's port: refused in the check play with its PID,
#      venv and log.
# The sitecustomize.py is put back after each step. Everything lands in $OUT (summary.txt, logs.tgz).
set -uo pipefail
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/lib.sh"
ptxas_wrapper /tmp/ptxas-calls.log "ptxas-logged -> /usr/local/cuda-13.0/bin/ptxas "
mkdir -p /srv/models/standin && echo '{"architectures": ["StandInForCausalLM"]}' >/srv/models/standin/config.json
# The check play holds --tp against the GPUs (issue 41): one rank on a one-GPU host.
tp_args=()
[ "$(nvidia-smi -L | wc -l)" -lt 2 ] && tp_args=(-e '{"sglang_server_args": ["--tp", "1"]}')
site() {  # $1 = log name
  local start=$SECONDS
  timeout -k 10 400 ansible-playbook -i tests/gpu/inventory.yml -e @tests/gpu/nccl_decode.yml "${tp_args[@]}" \
    -e inferops_fast_path=false site.yml -l blackwell -v >"$out/$1.log" 2>&1
  local rc=$?
  say "$1: rc=$rc in $((SECONDS - start)) s; $(grep -A1 'PLAY RECAP' "$out/$1.log" | tail -n1 | tr -s ' ')"
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

if [ -n "$distro" ]; then
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

python3 -m venv --without-pip /tmp/hand-env && mkdir -p /data/logs
(cd /data && nohup /tmp/hand-env/bin/python -c 'import socket, time; s = socket.socket(); s.bind(("0.0.0.0", 30000)); s.listen(); time.sleep(600)' \
  -m sglang.launch_server --port 30000 --api-key s3cr3t >/data/logs/sglang.log 2>&1 &)
sleep 2
site 4-hand-server
say "  refusal: $(msg 4-hand-server 'an SGLang server the collection does not run')"
pkill -f 'hand-env/bin/python' || true

(cd "$out" && tar czf logs.tgz ./*.log && rm -f ./*.log)
