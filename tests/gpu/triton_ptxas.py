"""Compiles and runs one Triton kernel in a fresh cache, so Triton must call ptxas.

Run with the ml-env venv's python: TRITON_PTXAS_PATH comes from its start-up hook.
"""

import os
import tempfile

os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


x = torch.zeros(4096, device="cuda")
add_one[(4,)](x, x.numel(), BLOCK=1024)
torch.cuda.synchronize()
print("TRITON_PTXAS_PATH=%s TRITON_PTXAS_BLACKWELL_PATH=%s triton=%s sum=%d" % (
    os.environ.get("TRITON_PTXAS_PATH"), os.environ.get("TRITON_PTXAS_BLACKWELL_PATH"), triton.__version__, int(x.sum().item())))
assert int(x.sum().item()) == 4096
