#!/usr/bin/env bash
# Records the raw nvidia-smi outputs that tests/unit/fixtures/ replays, exactly as this host prints them.
# Usage: capture_nvidia_smi.sh DEST_DIR
set -u
dest=${1:?usage: $0 DEST_DIR}
mkdir -p "$dest"
q_gpu=index,name,uuid,pci.bus_id,memory.total,memory.used,compute_cap,driver_version
nvidia-smi --query-gpu=$q_gpu --format=csv,noheader,nounits >"$dest/query_gpu.csv" 2>&1
nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits >"$dest/query_apps.csv" 2>&1
nvidia-smi topo -m >"$dest/topo.txt" 2>&1
nvidia-smi >"$dest/nvidia_smi.txt" 2>&1
nvidia-smi --version >"$dest/version.txt" 2>&1
echo "captured into $dest:"; ls -l "$dest"
