#!/usr/bin/env bash
# On the real GPU host: the sglang_server module (process manager) over the stand-in in GPU mode,
# --tp 2: start (health gate), generations, nvidia-smi while serving, stop (GPU memory released),
# nvidia-smi after. No role, no systemd: the module and the stand-in's ranks only.
set -uo pipefail
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/lib.sh"
mkdir -p /tmp/sg /srv/models/standin
export ANSIBLE_COLLECTIONS_PATH=$PWD/.collections ANSIBLE_HOME=/tmp/ah
echo "PID 1: $(cat /proc/1/comm); systemctl: $(command -v systemctl || echo none)"
args() {
  printf '{"manager": "process", "log_path": "/tmp/sg/server.log", "port": 30000, "timeout": 300, "stall_timeout": 120, "state": "%s",
  "command": ["/opt/torch/.venv/bin/python", "-m", "sglang.launch_server", "--model-path", "/srv/models/standin", "--tp", "2", "--port", "30000"],
  "environment": {"PYTHONPATH": "%s/tests/fixtures/sglang_standin", "SGLANG_STANDIN_GPU": "1", "NCCL_DEBUG": "INFO"}}' "$1" "$PWD"
}
mod() { ansible localhost -o -m inferops.gpu.sglang_server -a "$(args "$1")" 2>&1 | cut -c1-3000; }
time mod started
nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader
curl -s -m 30 http://127.0.0.1:30000/generate -H 'Content-Type: application/json' -d '{"text": "hi", "sampling_params": {"max_new_tokens": 16}}'; echo
grep -E "TP[01]\]" /tmp/sg/server.log | grep -iE "nccl|mem|GiB" | head -n 8
time mod stopped
echo "after stop: [$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader)]"
cp /tmp/sg/server.log "$out/standin-gpu-server.log"
