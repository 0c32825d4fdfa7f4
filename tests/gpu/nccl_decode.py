"""All-reduce at the sizes TP decode uses, eager and CUDA-graph captured, plus bus bandwidth.

One process per visible GPU (world size = torch.cuda.device_count()), as nccl_allreduce.py does.
Decode all-reduces are one (batch x hidden) bf16 activation per layer: hidden 7168 x batch 1..128
x 2 bytes is 14 KiB .. 1.75 MiB. For each size it times back-to-back all-reduces with CUDA events:
  eager  100 `dist.all_reduce` calls from Python per round, per-op latency = round / 100
  graph  the same 100 calls captured in one CUDA graph (as SGLang captures its decode step), per
         replay per-op latency = replay / 100
and reports the median over the rounds / replays (the slowest rank's time for each). Then bus
bandwidth (nccl-tests' algbw * 2(n-1)/n) from 1 MiB to 1 GiB of float32, comparable with
docs/benchmarks.md's table. Run it with the ml-env venv's python so its start-up hook supplies the
NCCL profile; every line it means for a machine starts with `RESULT ` and holds one JSON object.
With one GPU the all-reduce has one rank: NCCL runs it, but no byte crosses an interconnect, so the
figures are launch and local-copy costs only (the meta line says `interconnect: false`).
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys

HIDDEN = 7168
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128]
BW_SIZES = [1 << p for p in range(20, 31, 2)]  # 1 MiB .. 1 GiB, the sizes of nccl_allreduce.py
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL", "TORCH_SYMM", "NVSHMEM_", "CUDA_HOME", "CUDA_VISIBLE", "TRITON_PTXAS")
NO_INTERCONNECT = ("world size 1: the all-reduce has a single rank, so no byte crosses an interconnect; "
                   "these are launch and local costs only, not interconnect figures")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--profile", default="", help="label of the NCCL profile the spec holds (recorded only)")
    parser.add_argument("--hidden", type=int, default=HIDDEN)
    parser.add_argument("--batches", type=int_list, default=BATCHES, help="comma list (default 1..128)")
    parser.add_argument("--ops", type=int, default=100, help="all-reduces per round and per captured graph")
    parser.add_argument("--rounds", type=int, default=30, help="timed eager rounds and graph replays (>= 20)")
    parser.add_argument("--bw-sizes", type=int_list, default=BW_SIZES, help="bytes, comma list")
    parser.add_argument("--bw-iters", type=int, default=20)
    parser.add_argument("--bw-rounds", type=int, default=3, help="median over this many rounds of --bw-iters")
    parser.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph measurement")
    parser.add_argument("--no-bw", action="store_true", help="skip the bandwidth sweep")
    args = parser.parse_args(argv)
    if args.rounds < 20 or args.ops < 1 or args.hidden < 1 or args.bw_iters < 1 or args.bw_rounds < 1:
        parser.error("--rounds must be >= 20 (a median of many), the others >= 1")
    return args


def int_list(text):
    return [int(part) for part in text.split(",") if part.strip()]


def emit(kind, **fields):
    # rank 0 only; flushed per line so a run killed at its limit keeps what it measured
    print("RESULT " + json.dumps(dict(kind=kind, **fields), sort_keys=True), flush=True)


def seen_env(environ=None):
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES)}


def bus_factor(world):
    return 2.0 * (world - 1) / world


def gbps(size, seconds):
    return size / seconds / 1e9 if seconds > 0 else 0.0


def quantile(ordered, q):
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def stats(values):
    """Median and spread of per-op microseconds."""
    ordered = sorted(values)
    return {"median_us": round(statistics.median(ordered), 3), "min_us": round(ordered[0], 3),
            "p10_us": round(quantile(ordered, 0.1), 3), "p90_us": round(quantile(ordered, 0.9), 3),
            "n": len(ordered)}


def free_port():
    # a fixed port (nccl_allreduce.py's 29500 + pid) can still be held by an earlier run's TIME_WAIT
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.split("\n")[0].strip() or None


class Bench:
    """One rank's measurements; every timing is reduced to the slowest rank before rank 0 reports it."""

    def __init__(self, torch, dist, rank, world):
        self.torch, self.dist, self.rank, self.world = torch, dist, rank, world

    def slowest(self, values):
        tensor = self.torch.tensor(values, dtype=self.torch.float64, device="cuda")
        self.dist.all_reduce(tensor, op=self.dist.ReduceOp.MAX)
        return tensor.tolist()

    def align(self):
        # start every round together so one rank's lag is not timed as the others' all-reduce
        self.torch.cuda.synchronize()
        self.dist.barrier()
        self.torch.cuda.synchronize()

    def timed(self, launch, ops):
        """Per-op microseconds of `launch()` (which issues `ops` all-reduces), by CUDA events."""
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.align()
        start.record()
        launch()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / ops

    def check_sum(self, dtype, shape):
        x = self.torch.ones(shape, dtype=dtype, device="cuda")
        self.dist.all_reduce(x)
        return bool(self.torch.all(x == self.world).item())

    def eager(self, x, ops, rounds):
        def launch():
            for dummy in range(ops):
                self.dist.all_reduce(x)
        launch()  # warm: NCCL sets up its channels for this size on the first call
        return self.slowest([self.timed(launch, ops) for dummy in range(rounds)])

    def capture(self, x, ops):
        torch = self.torch
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up on the capture stream, as torch's docs ask
            for dummy in range(3):
                self.dist.all_reduce(x)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        # thread_local: NCCL's watchdog thread keeps querying its events while this thread captures
        with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
            for dummy in range(ops):
                self.dist.all_reduce(x)
        torch.cuda.synchronize()
        return graph

    def graph(self, x, ops, rounds):
        graph = self.capture(x, ops)
        graph.replay()
        times = self.slowest([self.timed(graph.replay, ops) for dummy in range(rounds)])
        del graph
        return times

    def bandwidth(self, size, iters, rounds):
        x = self.torch.ones(size // 4, dtype=self.torch.float32, device="cuda")

        def launch():
            for dummy in range(iters):
                self.dist.all_reduce(x)
        for dummy in range(3):
            self.dist.all_reduce(x)
        per_op_us = self.slowest([self.timed(launch, iters) for dummy in range(rounds)])
        del x
        return statistics.median(per_op_us)


def meta(torch, world, args, same_env):
    nccl = torch.cuda.nccl.version()
    return dict(profile=args.profile, world=world, interconnect=world > 1,
                note=None if world > 1 else NO_INTERCONNECT, env=seen_env(), env_same_on_all_ranks=same_env,
                torch=torch.__version__, cuda=torch.version.cuda,
                nccl=".".join(str(part) for part in nccl) if isinstance(nccl, tuple) else str(nccl),
                gpus=[torch.cuda.get_device_name(i) for i in range(world)], driver=driver_version(),
                python=sys.executable, hidden=args.hidden, ops=args.ops, rounds=args.rounds)


def measure_latency(bench, args, mode, lead):
    torch = bench.torch
    for batch in args.batches:
        x = torch.zeros((batch, args.hidden), dtype=torch.bfloat16, device="cuda")  # zeros: sums stay finite
        try:
            times = (bench.eager if mode == "eager" else bench.graph)(x, args.ops, args.rounds)
        except Exception as exc:  # pylint: disable=broad-except
            # a capture that fails says so on its line; the eager figures already printed stand
            if lead:
                emit("latency", mode=mode, batch=batch, bytes=x.numel() * 2, error=repr(exc)[:500])
            return False
        if lead:
            emit("latency", mode=mode, batch=batch, bytes=x.numel() * 2, **stats(times))
        del x
    return True


def measure_bandwidth(bench, args, lead):
    for size in args.bw_sizes:
        per_op_us = bench.bandwidth(size, args.bw_iters, args.bw_rounds)
        algbw = gbps(size, per_op_us / 1e6)
        if lead:
            emit("busbw", bytes=size, us=round(per_op_us, 3), algbw_gbps=round(algbw, 2),
                 busbw_gbps=round(algbw * bus_factor(bench.world), 2), dtype="float32")


def worker(rank, world, args, port):
    import torch  # pylint: disable=import-outside-toplevel,import-error
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel,import-error
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    lead = rank == 0
    envs = [None] * world
    dist.all_gather_object(envs, seen_env())
    bench = Bench(torch, dist, rank, world)
    sums_ok = bench.check_sum(torch.float32, (1024,)) and bench.check_sum(torch.bfloat16, (1, args.hidden))
    if lead:
        emit("meta", sum_ok=sums_ok, **meta(torch, world, args, all(e == envs[0] for e in envs)))
    if not sums_ok:
        dist.destroy_process_group()
        sys.exit(1)
    measure_latency(bench, args, "eager", lead)
    if not args.no_bw:
        measure_bandwidth(bench, args, lead)
    # the capture last: should it break the communicator, everything before it is already out
    graph_ok = args.no_graph or measure_latency(bench, args, "graph", lead)
    if lead:
        emit("done", graph_ok=graph_ok)
    dist.destroy_process_group()


def main(argv=None):
    args = parse_args(argv)
    import torch  # pylint: disable=import-outside-toplevel,import-error
    import torch.multiprocessing as mp  # pylint: disable=import-outside-toplevel,import-error
    world = torch.cuda.device_count()
    if world < 1:
        sys.exit("nccl_decode: no GPU visible")
    if world == 1:
        print("nccl_decode: " + NO_INTERCONNECT, file=sys.stderr, flush=True)
    mp.spawn(worker, args=(world, args, free_port()), nprocs=world, join=True)


if __name__ == "__main__":
    main()
