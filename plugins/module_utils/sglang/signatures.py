# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an SGLang log says went wrong, and what to do about it.

The table is data (the texts come from the sglang 0.5.9 and 0.5.23 wheels and their issue tracker,
see docs/architecture.md; the contract step checks the ones sglang_versions.EVIDENCE names). Order
matters: a root cause is listed before the lines it drags after it (a CUDA OOM is followed by
`Scheduler hit an exception` and `Received sigquit`), and the first entry that matched any line wins.
"""

from __future__ import annotations

import re

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.versions import (
    CAPTURE_FAILED, IMPORT_WARNING, RANK_DIED,
)

# Lines no signature may match: SGLang logs them on healthy starts. The model registry quotes the
# import error of every optional model module it skips, `undefined symbol` and version texts included.
BENIGN = (IMPORT_WARNING,)

# CSI sequences (colours, cursor moves) and the OSC/charset escapes loggers emit.
_ANSI_RE = re.compile(r'\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z])')

SIGNATURES = (
    {
        'cause': 'cudnn_guard',
        'patterns': [r'CuDNN Compatibility Issue Detected'],
        'summary': 'SGLang refused to start: torch 2.9.1 with a cuDNN older than 9.15 (its cuDNN guard)',
        'fix': 'set SGLANG_DISABLE_CUDNN_CHECK=1 in the runtime environment '
               '(runtime_env_sglang_disable_cudnn_check: true), or add nvidia-cudnn-cu13==9.16.0.29 to the stack',
    },
    {
        'cause': 'abi_mismatch',
        'patterns': [r'undefined symbol: (?P<symbol>\S+)', r'Could not load any common_ops library'],
        'summary': 'sgl-kernel cannot load against this torch (C++ ABI mismatch)',
        'fix': 'pin the torch that the kernel package was built against (torch 2.9.1+cu130 for sgl-kernel '
               '0.3.21+cu130; sglang 0.5.23 ships it as sglang-kernel 0.4.x) in the ml_env profile and rebuild the '
               'release; ml_env_check names the missing symbol',
    },
    {
        'cause': 'kernel_libs_too_old',
        'patterns': [r'is installed with version \S+, which is less than the minimum required version \S+'],
        'summary': 'a kernel library is older than this SGLang requires',
        'fix': 'pin the named package at or above the minimum version in the ml_env profile and rebuild the release',
    },
    {
        'cause': 'flashinfer_mismatch',
        'patterns': [r'flashinfer-cubin version \(\S+\) does not match flashinfer version'],
        'summary': 'flashinfer-python and flashinfer-cubin have different versions',
        'fix': 'pin flashinfer-python and flashinfer-cubin to the same version (the profile must override '
               "sglang's own flashinfer pin)",
    },
    {
        'cause': 'kv_pool_oom',
        'patterns': [r'Not enough memory\. Please try to increase --mem-fraction-static'],
        'summary': 'the KV cache pool does not fit in the GPU memory left after the weights',
        'fix': 'raise --mem-fraction-static, free the GPU memory other processes hold, or shard over more GPUs (--tp)',
    },
    # SGLang wraps any RuntimeError of the capture in `Capture cuda graph failed: {e}` (its hint
    # always says memory): the inner error, on the same line, names the real cause.
    {
        'cause': 'cuda_graph_oom',
        'patterns': [re.escape(CAPTURE_FAILED) + r': .*(?:out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED)'],
        'summary': 'CUDA graph capture ran out of GPU memory',
        'fix': 'lower the captured batch size (--cuda-graph-max-bs; --cuda-graph-max-bs-decode from sglang 0.5.23) '
               'or --mem-fraction-static (graphs need memory outside the KV pool)',
    },
    {
        'cause': 'cuda_graph_nccl',
        'patterns': [re.escape(CAPTURE_FAILED) + r': .*(?:NCCL|nccl)'],
        'summary': 'CUDA graph capture failed in a collective (NCCL or the custom all-reduce), not for memory',
        'fix': 'check the node with gpu_health (P2P, ACS/IOMMU) and the NCCL profile of runtime_env; on PCIe hosts '
               'run with --disable-custom-all-reduce; NCCL_DEBUG=INFO for the detail',
    },
    {
        'cause': 'cuda_graph_kernel',
        'patterns': [re.escape(CAPTURE_FAILED) + r': .*(?:no kernel image|invalid device function|illegal memory access'
                     r'|illegal instruction|unspecified launch failure|CUDA error)'],
        'summary': 'CUDA graph capture failed in a kernel, not for memory',
        'fix': "a kernel of the stack does not run on these GPUs (no kernel image: a wheel built without their "
               "architecture) or crashed: check that the kernel package and flashinfer of the release have kernels "
               "for the GPUs' compute capability (gpu_info), and name the failing kernel with CUDA_LAUNCH_BLOCKING=1",
    },
    {
        'cause': 'cuda_graph_failed',
        'patterns': [re.escape(CAPTURE_FAILED)],
        'summary': 'CUDA graph capture failed',
        'fix': 'read the inner error after "Capture cuda graph failed:" in the log tail (SGLang wraps every error of '
               'the capture in it, and its hint always says memory); --disable-cuda-graph (0.5.23: '
               '--cuda-graph-backend-decode=disabled) confirms that the capture is the cause',
    },
    {
        'cause': 'cuda_oom',
        'patterns': [r'OutOfMemoryError', r'CUDA out of memory'],
        'summary': 'a rank ran out of GPU memory',
        'fix': 'lower --mem-fraction-static, and check with nvidia-smi that no other process holds GPU memory',
    },
    # A multi-node TP group (--nnodes): torch's rendezvous at --dist-init-addr and gloo's CPU group between the
    # nodes (c10d TCPStore.cpp waitForWorkers, socket.cpp throwTimeoutError, Utils.hpp recvBytes; gloo
    # transport/tcp/pair.cc, as sglang#3685 and #26375 show it through broadcast_pyobj).
    {
        'cause': 'group_peer_lost',
        'patterns': [r'Connection closed by peer', r'Read error \S+: Connection reset by peer',
                     r'Connection was likely closed\. Did the remote server shutdown or crash'],
        'summary': 'a rank on another host of the multi-node group went away (its server crashed or stopped)',
        'fix': "read the other members' logs: the group's failure names the rank and host that failed first, the "
               'others only lost it',
    },
    {
        'cause': 'group_rendezvous',
        'patterns': [r'Timed out after \d+ seconds waiting for clients\. \d+/\d+ clients joined',
                     r'The client socket has timed out after \d+ms while trying to connect to',
                     r'wait timeout after \d+ms, keys: /default_pg'],
        'summary': 'the members of the multi-node group did not all meet at --dist-init-addr',
        'fix': "start every member (the roles start a group together), check that rank 0's address and port "
               '(sglang_server_tp_group_address, sglang_server_tp_group_port) are reachable from every member '
               '(firewall, DNS), and that no member failed first',
    },
    {
        'cause': 'group_port_in_use',
        'patterns': [r'failed to listen on any local network address.*(?i:address already in use)'],
        'summary': "the port of --dist-init-addr on rank 0 is taken by another process",
        'fix': 'free it (ss -ltnp names the holder) or choose another one (sglang_server_tp_group_port)',
    },
    {
        'cause': 'nccl',
        'patterns': [r'NCCL error', r'DistBackendError', r'ncclUnhandledCudaError', r'ncclSystemError',
                     r'ncclInternalError', r'ncclInvalidUsage', r'ncclRemoteError'],
        'summary': 'NCCL failed between the tensor-parallel ranks',
        'fix': 'check the node with gpu_health (P2P, ACS/IOMMU, Xid) and the NCCL profile of runtime_env; '
               'NCCL_P2P_DISABLE=1 as a diagnostic, NCCL_DEBUG=INFO for the detail',
    },
    {
        'cause': 'port_in_use',
        # "[Errno 98] Address already in use" (uvicorn), "address already in use" (asyncio's bind error).
        'patterns': [r'(?i)address already in use'],
        'summary': 'the HTTP port is taken by another process',
        'fix': 'free the port (ss -ltnp names the holder) or choose another one (sglang_server_port)',
    },
    {
        'cause': 'warmup_failed',
        'patterns': [r'Initialization failed\. warmup error:'],
        'summary': "the server loaded but its own warmup request failed",
        'fix': 'read the warmup error in the log tail; the model loaded but could not generate',
    },
    {
        'cause': 'model_not_found',
        'patterns': [r'is not a local folder and is not a valid model identifier',
                     r"Can't load the configuration of"],
        'summary': 'the model path cannot be read as a model',
        'fix': 'check sglang_server_model_path: it must be a model directory the service user can read',
    },
    {
        'cause': 'bad_arguments',
        # argparse's own error line (`<prog>: error: ...`, exit 2): 0.5.23 refuses --cuda-graph-max-bs as ambiguous.
        'patterns': [r'^(?:usage: \S+.*\n?)?\S+(?: serve)?: error: (?P<error>(?:ambiguous option|unrecognized arguments'
                     r'|argument \S+|the following arguments are required).*)'],
        'summary': "SGLang's argument parser refused the command line",
        'fix': 'make sglang_server_args and _extra_args options of the SGLang release the host runs '
               '(sglang_server_sglang_version: 0.5.23 renamed --cuda-graph-max-bs to --cuda-graph-max-bs-decode); '
               '`python -m sglang.launch_server --help` in the release lists them',
    },
    {
        'cause': 'missing_module',
        'patterns': [r"ModuleNotFoundError: No module named '(?P<module>[^']+)'"],
        'summary': 'the release lacks a Python module that SGLang imports',
        'fix': "add the distribution that provides the named module to the ml_env profile's packages (or its lock) "
               'and rebuild the release; list the module in the profile\'s imports so that ml_env_check catches it '
               'at build time',
    },
    {
        'cause': 'rank_killed',
        # sglang 0.5.23 (entrypoints/engine.py _scheduler_died_error): -9 is a SIGKILL, most often the OOM killer.
        'patterns': [r'Rank (?P<rank>[0-9]+) ' + RANK_DIED + r' \(exit code: -9\)'],
        'summary': 'a rank was killed (SIGKILL) while it loaded: most often the kernel OOM killer (host memory)',
        'fix': 'read `dmesg -T | grep -i oom` on the host; lower host memory use while loading (fewer loader '
               'threads, other processes) or add memory',
    },
    {
        'cause': 'rank_crash',
        # The sigquit text differs once the server has served a request (the tokenizer manager's handler);
        # 0.5.23 names the rank that died while it started.
        'patterns': [r'Scheduler hit an exception', r'Received sigquit from a child process',
                     r'It usually means (?:the|one) child failed',
                     r'scheduler is dead', r'Initialization failed\. Please see the error messages above',
                     r'Rank (?P<rank>[0-9]+) ' + RANK_DIED + r' \(exit code: (?P<exit_code>-?[0-9]+)\)'],
        'summary': 'a tensor-parallel rank crashed and SGLang killed its process tree',
        'fix': "the rank's traceback is in the log tail; the lines before it name the failing step",
    },
)

# Seen on healthy starts too; they only explain a stall or an exit.
HINTS = (
    {'cause': 'nccl_warning', 'patterns': [r'NCCL WARN']},
)

_COMPILED = [(sig, [re.compile(p) for p in sig['patterns']]) for sig in SIGNATURES]
_COMPILED_HINTS = [(sig, [re.compile(p) for p in sig['patterns']]) for sig in HINTS]


# ServerArgs(...) echoes the API key; keyword=value and "key": value forms of secret settings.
# Only setting names: SGLang's batch lines have "#new-token: 12", which is not a secret.
_SECRET_RE = re.compile(r'''(?P<key>(?<![\w#-])(?:api_key|admin_api_key|hf_token|HF_TOKEN|password)\b['"]?\s*[=:]\s*)'''
                        r'''(?P<value>'[^']*'|"[^"]*"|[^\s,)]+)''', re.IGNORECASE)
MASK = '********'


def strip_ansi(text):
    return _ANSI_RE.sub('', text)


def redact(text, secrets=()):
    """`text` without secret values: the known ones anywhere, and any `api_key=...`-like setting."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)

    def mask(match):
        value = match.group('value')
        if value in ('None', "''", '""', 'null'):
            return match.group(0)
        quote = value[0] if value[0] in '\'"' else ''
        return match.group('key') + quote + MASK + quote
    return _SECRET_RE.sub(mask, text)


class SignatureScanner:
    """Feeds on log lines; remembers the first line each signature matched."""

    def __init__(self):
        self.matches = {}
        self.hints = {}

    def feed(self, lines):
        for line in lines:
            if any(benign in line for benign in BENIGN):
                continue
            for table, found in ((_COMPILED, self.matches), (_COMPILED_HINTS, self.hints)):
                for sig, regexes in table:
                    hit = found.get(sig['cause'])
                    if hit and hit['groups']:
                        continue
                    for regex in regexes:
                        match = regex.search(line)
                        if not match:
                            continue
                        if hit is None:
                            found[sig['cause']] = {'line': line.strip(), 'groups': match.groupdict()}
                        elif match.groupdict():
                            # The first line stays the one shown; a later one may carry the detail (the symbol).
                            hit['groups'] = match.groupdict()
                        break

    def verdict(self):
        """The highest-ranked matched signature as {cause, summary, fix, line, detail}, or None."""
        for sig in SIGNATURES:
            hit = self.matches.get(sig['cause'])
            if hit:
                return {'cause': sig['cause'], 'summary': sig['summary'], 'fix': sig['fix'],
                        'line': hit['line'], 'detail': dict((k, v) for k, v in hit['groups'].items() if v)}
        return None

    @property
    def fatal(self):
        return bool(self.matches)
