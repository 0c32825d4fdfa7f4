"""All-reduce over every local GPU, one process per GPU, with the environment the process got.

Prints the NCCL_* / CUDA variables each rank sees, checks the sum, and with --bench measures
all-reduce bus bandwidth (nccl-tests' definition: algbw * 2 * (n - 1) / n) from 1 MiB to 1 GiB.
Run it with the ml-env venv's python so its start-up hook supplies the spec; NCCL_DEBUG=INFO
makes NCCL print `NCCL_X set by environment to Y` for each variable it reads.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [1 << p for p in range(20, 31, 2)]  # 1 MiB .. 1 GiB


def bench(rank, world, size, iters):
    x = torch.ones(size // 4, dtype=torch.float32, device=rank)
    for dummy in range(3):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for dummy in range(iters):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / iters
    return size / seconds * 2 * (world - 1) / world / 1e9


def worker(rank, world, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    seen = {k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "TORCH_SYMM", "CUDA_HOME", "TRITON_PTXAS"))}
    x = torch.full((1024,), float(rank + 1), device=rank)
    dist.all_reduce(x)
    expected = world * (world + 1) / 2
    ok = bool(torch.all(x == expected).item())
    result = {"rank": rank, "env": seen, "sum": x[0].item(), "expected": expected, "ok": ok}
    if args.bench and ok:
        result["busbw_gbps"] = {str(s): round(bench(rank, world, s, args.iters), 2) for s in SIZES}
    if rank == 0:
        print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()
    if not ok:
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", action="store_true")
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    world = torch.cuda.device_count()
    mp.spawn(worker, args=(world, args, 29500 + os.getpid() % 1000), nprocs=world, join=True)


if __name__ == "__main__":
    main()
