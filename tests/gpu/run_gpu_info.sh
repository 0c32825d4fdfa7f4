#!/usr/bin/env bash
# On the real GPU host: ansible-core from carried wheels (.whl), a process holding memory on every
# GPU, then tests/gpu/gpu_info.yml through both backends. Writes into $OUT.
set -euo pipefail
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/lib.sh"
python3 -c 'import torch, time, sys
xs = [torch.empty(256 << 20, dtype=torch.uint8, device=f"cuda:{i}") for i in range(torch.cuda.device_count())]
torch.cuda.synchronize(); print("holding", flush=True); time.sleep(120)' >"$out/holder.log" 2>&1 &
holder=$!
for _ in $(seq 60); do grep -q holding "$out/holder.log" && break; sleep 1; done
GPU_HOLDER_PID=$holder GPU_DUMP_DIR=$out GPU_EXPECT_COUNT=${GPU_EXPECT_COUNT:-2} \
  GPU_EXPECT_TOPOLOGY=${GPU_EXPECT_TOPOLOGY:-nvlink} \
  ansible-playbook tests/gpu/gpu_info.yml 2>&1 | tee "$out/ansible.log"
kill "$holder"
