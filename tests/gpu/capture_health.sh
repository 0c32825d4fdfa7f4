#!/usr/bin/env bash
# Records the raw outputs the gpu_health unit tests replay (tests/unit/fixtures/gpu_health/<host>/):
# smi_q.txt, topo_p2p_r.txt, dmesg.txt, cmdline.txt; plus, for reading, lspci and sysfs link facts.
# Usage: capture_health.sh DEST_DIR
set -u
dest=${1:?usage: $0 DEST_DIR}
mkdir -p "$dest"
nvidia-smi -q >"$dest/smi_q.txt" 2>&1
nvidia-smi topo -p2p r >"$dest/topo_p2p_r.txt" 2>&1
dmesg >"$dest/dmesg.txt" 2>&1
cat /proc/cmdline >"$dest/cmdline.txt"
if command -v lspci >/dev/null; then lspci -vvv >"$dest/lspci_vvv.txt" 2>&1; fi
{
  echo "iommu groups: $(find /sys/kernel/iommu_groups -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)"
  for bus in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader); do
    dev=/sys/bus/pci/devices/$(echo "$bus" | tr '[:upper:]' '[:lower:]' | sed 's/^0000//')
    echo "$bus -> $(readlink -f "$dev")"
    for f in current_link_speed max_link_speed current_link_width max_link_width; do
      echo "  $f: $(cat "$dev/$f" 2>&1)"
    done
  done
} >"$dest/sysfs.txt"
echo "captured into $dest:"; ls -l "$dest"
