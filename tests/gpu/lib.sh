# shellcheck shell=bash
# Sourced by tests/gpu/run_*.sh on the GPU host (no network there): the output folder ($OUT, which
# the device tool brings back), ansible-core and its dependencies from the carried wheels (.whl,
# `make gpu-wheels`) on PYTHONPATH, the summary file and say(). SUMMARY may name another file.
# ptxas_wrapper LOG makes /usr/local/bin/ptxas-logged: CUDA 13.0's ptxas behind a line in LOG per
# call, the inventories' runtime_env_ptxas, so a run shows which ptxas Triton and the roles called.
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
summary=${SUMMARY:-$out/summary.txt}
say() { echo "$*" | tee -a "$summary"; }

ptxas_wrapper() {  # $1 = the log each call appends a line to; $2 = the line's prefix
  cat >/usr/local/bin/ptxas-logged <<SH
#!/bin/sh
echo "${2:-}\$*" >>$1
exec /usr/local/cuda-13.0/bin/ptxas "\$@"
SH
  chmod 0755 /usr/local/bin/ptxas-logged
}
