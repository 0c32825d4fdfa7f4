# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One rank of the NCCL smoke test: an all-reduce whose sum is known, then a bus bandwidth figure.

nccl_smoke.run_smoke writes this file's source into a private directory and runs it with the torch
venv's python, once per GPU, so it is a script first. It lives in module_utils only so that the
module's AnsiballZ payload carries it; torch is imported inside main() because the module that
ships this file runs under a python that has no torch.

The rank reads everything from the environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT, SMOKE_SIZE_BYTES, SMOKE_ITERS) and prints machine lines on stdout, flushed at once
so that the runner sees where a rank stopped when it has to kill it:
    SMOKE phase init | allreduce | bandwidth
    SMOKE nccl 2.28.9
    SMOKE result {"rank": r, "sum": s, "busbw_gbps": b, "seconds": t}
The NCCL line is the release torch loaded (torch.cuda.nccl.version()), said before the rendezvous so
that a hang or a crash is reported with it: which NCCL a venv really runs is what the report of a
Blackwell TP>1 failure needs first (ml_env's nccl-newer-than-2.26.2 judges only what is installed).
The runner, not the rank, judges the sum: a rank that judged itself would hide a broken check.
"""

from __future__ import annotations

import json
import os
import sys
import time

WARMUP_ITERS = 3
# The first all-reduce: every rank contributes rank + 1, so the sum is world * (world + 1) / 2.
CHECK_ELEMENTS = 1024


def say(kind, text):
    sys.stdout.write('SMOKE %s %s\n' % (kind, text))
    sys.stdout.flush()


def bus_bandwidth_gbps(size_bytes, seconds_per_iter, world):
    """nccl-tests' all-reduce bus bandwidth: algbw * 2 * (n - 1) / n, in GB/s."""
    if seconds_per_iter <= 0 or world < 2:
        return 0.0
    return size_bytes / seconds_per_iter * 2.0 * (world - 1) / world / 1e9


def nccl_release(version):
    """torch.cuda.nccl.version() as text like 2.28.9. torch answers a tuple, (2, 28, 9), with NCCL's
    suffix as a fourth item when the build has one; old torch answered NCCL's version code, an int:
    major * 10000 + minor * 100 + patch since NCCL 2.9 (22809), major * 1000 + minor * 100 + patch before (2708)."""
    if isinstance(version, int):
        major, rest = divmod(version, 10000 if version >= 10000 else 1000)
        return '%d.%d.%d' % (major, rest // 100, rest % 100)
    return '.'.join(str(part) for part in version[:3]) + ''.join(str(part) for part in version[3:])


def say_nccl():
    """The NCCL line; nothing from a torch without NCCL, whose init_process_group then says so itself."""
    try:
        from torch.cuda import nccl  # imports the submodule whether torch.cuda has imported it or not
        say('nccl', nccl_release(nccl.version()))
    except Exception:  # pylint: disable=broad-except
        pass


def main():
    started = time.perf_counter()
    rank = int(os.environ['RANK'])
    world = int(os.environ['WORLD_SIZE'])
    local_rank = int(os.environ.get('LOCAL_RANK', rank))
    size_bytes = int(os.environ.get('SMOKE_SIZE_BYTES', 64 << 20))
    iters = int(os.environ.get('SMOKE_ITERS', 20))

    say('phase', 'init')
    import torch  # here, not at the top: the module that ships this file has no torch
    import torch.distributed as dist

    say_nccl()
    torch.cuda.set_device(local_rank)
    device = torch.device('cuda', local_rank)
    # device_id binds the communicator to this GPU and creates it now, so a broken rendezvous or
    # transport shows up in phase init instead of in the first collective.
    dist.init_process_group('nccl', rank=rank, world_size=world, device_id=device)

    say('phase', 'allreduce')
    x = torch.full((CHECK_ELEMENTS,), float(rank + 1), dtype=torch.float32, device=device)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    # A transport that corrupts part of the buffer leaves elements that differ: NaN says so.
    uniform = bool(torch.all(x == x[0]).item())
    reduced = float(x[0].item()) if uniform else float('nan')

    # Every rank runs the bandwidth part, even after a wrong sum: a rank that skipped a collective
    # its peers enter would turn a wrong answer into a hang.
    say('phase', 'bandwidth')
    elements = max(1, size_bytes // 4)
    y = torch.ones((elements,), dtype=torch.float32, device=device)
    for dummy in range(WARMUP_ITERS):
        dist.all_reduce(y)
    torch.cuda.synchronize()
    dist.barrier()
    begin = time.perf_counter()
    for dummy in range(iters):
        dist.all_reduce(y)
    torch.cuda.synchronize()
    per_iter = (time.perf_counter() - begin) / max(1, iters)
    busbw = bus_bandwidth_gbps(elements * 4, per_iter, world) if rank == 0 else None

    say('result', json.dumps({'rank': rank, 'sum': reduced, 'busbw_gbps': busbw,
                              'seconds': round(time.perf_counter() - started, 3)}))
    dist.destroy_process_group()


if __name__ == '__main__':
    main()
