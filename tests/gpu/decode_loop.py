"""Decode tokens/s of the SGLang stand-in in GPU mode: TP ranks doing one all-reduce per layer.

Starts `python -m sglang.launch_server` from tests/fixtures/sglang_standin with --tp N, GPU mode,
SGLANG_STANDIN_LAYERS (60) all-reduces of a 1 x SGLANG_STANDIN_HIDDEN (7168) bf16 tensor per token,
waits for /health_generate, sends a few untimed requests, then --requests POST /generate of
--tokens tokens one after another, and prints one `RESULT {json}` line: tokens/s over the timed
requests, per-token and per-all-reduce time, and the NCCL variables the ranks logged. Standard
library only; run it with the ml-env venv's python (the server gets the same interpreter, so the
venv's start-up hook gives every rank the NCCL profile's spec). One rank (--tp 1) all-reduces
with itself: that measures the step's launch cost, not an interconnect.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STANDIN = os.path.join(REPO, "tests", "fixtures", "sglang_standin")
READY = "The server is fired up and ready to roll!"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--profile", default="", help="label of the NCCL profile the spec holds (recorded only)")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the server (default: this one)")
    parser.add_argument("--tp", type=int, default=0, help="ranks (default: the GPUs nvidia-smi lists)")
    parser.add_argument("--layers", type=int, default=60)
    parser.add_argument("--hidden", type=int, default=7168)
    parser.add_argument("--tokens", type=int, default=64, help="max_new_tokens of each request")
    parser.add_argument("--requests", type=int, default=10, help="timed requests")
    parser.add_argument("--warmup", type=int, default=2, help="untimed requests first")
    parser.add_argument("--start-timeout", type=float, default=120.0, help="seconds until /health_generate is 200")
    parser.add_argument("--request-timeout", type=float, default=60.0)
    parser.add_argument("--log", default="", help="server log (default: a temporary file)")
    args = parser.parse_args(argv)
    if min(args.layers, args.hidden, args.tokens, args.requests) < 1 or args.warmup < 0 or args.tp < 0:
        parser.error("--layers, --hidden, --tokens and --requests must be >= 1")
    return args


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(args):
    env = dict(os.environ)
    # as tests/gpu/run_stack.sh's venv_python: the venv's hook, not this shell, supplies the spec
    env.pop("CUDA_HOME", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [STANDIN, env.get("PYTHONPATH")]))
    env.update(SGLANG_STANDIN_GPU="1", SGLANG_STANDIN_LAYERS=str(args.layers), SGLANG_STANDIN_HIDDEN=str(args.hidden),
               SGLANG_STANDIN_GPU_MEM_GIB="0.5", SGLANG_STANDIN_LOAD_SECONDS="0.5",
               SGLANG_STANDIN_LOG_INTERVAL="0.25", SGLANG_STANDIN_WARMUP_SECONDS="0.2")
    return env


def model_dir():
    path = tempfile.mkdtemp(prefix="standin-model-")
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as handle:
        json.dump({"architectures": ["StandInForCausalLM"]}, handle)
    return path


def start(args, port, log_path):
    command = [args.python, "-m", "sglang.launch_server", "--model-path", model_dir(), "--tp", str(args.tp),
               "--host", "127.0.0.1", "--port", str(port), "--cuda-graph-max-bs", "128"]
    with open(log_path, "ab") as log:
        # its own session: the stop below can reach everything it started, whatever happens
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=server_env(args), start_new_session=True)


def call(port, method, path, body=None, timeout=10.0):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, response.read().decode()


def wait_ready(proc, port, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return "server exited with %s before it was ready" % proc.returncode
        try:
            if call(port, "GET", "/health_generate", timeout=5)[0] == 200:
                return None
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.5)
    return "not ready after %.0f s" % timeout


def generate(port, tokens, timeout):
    """(completion tokens, wall seconds) of one request."""
    body = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}}
    tic = time.perf_counter()
    status, text = call(port, "POST", "/generate", body, timeout=timeout)
    seconds = time.perf_counter() - tic
    if status != 200:
        raise RuntimeError("POST /generate answered %d: %s" % (status, text[:200]))
    return json.loads(text)["meta_info"]["completion_tokens"], seconds


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # the stand-in kills its ranks and exits 0 within a second
        try:
            proc.wait(timeout=20)
            return
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait(timeout=20)


def rank_lines(log_path):
    """What each rank logged about its environment and its decode step (evidence for the profile)."""
    with open(log_path, errors="replace", encoding="utf-8") as handle:
        return [line.strip() for line in handle if " sees: " in line or " decodes " in line]


def measure(args, port):
    for dummy in range(args.warmup):
        generate(port, args.tokens, args.request_timeout)
    runs = [generate(port, args.tokens, args.request_timeout) for dummy in range(args.requests)]
    tokens = sum(count for count, _seconds in runs)
    seconds = sum(seconds for _count, seconds in runs)
    per_request = sorted(count / secs for count, secs in runs)
    return {"tokens": tokens, "seconds": round(seconds, 4), "tokens_per_s": round(tokens / seconds, 1),
            "median_request_tokens_per_s": round(per_request[len(per_request) // 2], 1),
            "request_tokens_per_s": [round(count / secs, 1) for count, secs in runs],
            "ms_per_token": round(1000.0 * seconds / tokens, 4),
            "us_per_all_reduce": round(1e6 * seconds / tokens / args.layers, 2)}


def on_sigterm(signum, frame):
    # timeout(1) at the step's limit: unwind through `finally`, which stops the server
    del frame
    sys.exit(128 + signum)


def main(argv=None):
    args = parse_args(argv)
    args.tp = args.tp or gpu_count()
    if args.tp < 1:
        sys.exit("decode_loop: no GPU found (nvidia-smi -L) and no --tp given")
    log_path = args.log or tempfile.mkstemp(prefix="standin-decode-", suffix=".log")[1]
    port = free_port()
    result = {"kind": "decode_loop", "profile": args.profile, "tp": args.tp, "layers": args.layers,
              "hidden": args.hidden, "tokens_per_request": args.tokens, "requests": args.requests,
              "interconnect": args.tp > 1}
    signal.signal(signal.SIGTERM, on_sigterm)
    proc = start(args, port, log_path)
    try:
        error = wait_ready(proc, port, args.start_timeout)
        if error is None:
            result.update(measure(args, port))
        else:
            result["error"] = error
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        result["error"] = repr(exc)[:500]
    finally:
        stop(proc)
    result["ranks"] = rank_lines(log_path)
    print("RESULT " + json.dumps(result, sort_keys=True), flush=True)
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
