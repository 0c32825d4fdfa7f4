#!/usr/bin/env bash
# Records the raw outputs the gpu_health parsers replay: nvidia-smi -q, topo -p2p, lspci, kernel log, IOMMU.
set -u
d=${1:?usage: $0 DEST_DIR}; mkdir -p "$d"
nvidia-smi -q >"$d/smi_q.txt" 2>&1
for m in r w n a p; do echo "== topo -p2p $m"; nvidia-smi topo -p2p $m; done >"$d/topo_p2p.txt" 2>&1
{ which lspci; lspci -vvv; } >"$d/lspci_vvv.txt" 2>&1
{ lspci -tv; echo ==; lspci -nn; } >"$d/lspci_tree.txt" 2>&1
{ echo "== journalctl -k"; timeout 20 journalctl -k --no-pager -o short-monotonic | tail -400; echo "== dmesg"; timeout 20 dmesg | tail -400; } >"$d/kernel_log.txt" 2>&1
{ echo "== cmdline"; cat /proc/cmdline; echo "== groups"; ls /sys/kernel/iommu_groups | wc -l; ls /sys/class/iommu; echo "== gpu sysfs";
  for b in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader); do p=/sys/bus/pci/devices/$(echo $b | tr A-Z a-z | sed 's/^0000//'); echo "$b -> $p"; readlink -f $p; for f in current_link_speed max_link_speed current_link_width max_link_width iommu_group; do echo "$f: $(cat $p/$f 2>&1; readlink $p/$f 2>/dev/null)"; done; done;
  echo "== id"; id; uname -a; cat /etc/os-release | head -3; echo "== env"; env | grep -E 'NCCL|TORCH|CUDA' ; which python3; python3 -c 'import torch,sys; print(torch.__version__, sys.executable); n=torch.cuda.device_count(); print([[torch.cuda.can_device_access_peer(i,j) if i!=j else None for j in range(n)] for i in range(n)])'; } >"$d/host.txt" 2>&1
ls -l "$d"
