# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Signature matching on the texts sglang 0.5.9 and 0.5.23 print (from the wheels and the issue tracker)."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.signatures import (
    SIGNATURES, SignatureScanner, redact, strip_ansi,
)

RED, RESET = '\x1b[91m', '\x1b[0m'

# (cause, log lines) as the real server writes them; colour codes included where sglang uses them.
REAL_FAILURES = [
    ('cudnn_guard', [
        "[2026-11-30 10:00:01] server_args=ServerArgs(model_path='/shared/kimi-k2.5-int4', tp_size=8)",
        RED + '--------------------------------------------------------------------------------',
        'CRITICAL WARNING: PyTorch 2.9.1 & CuDNN Compatibility Issue Detected',
        'Current Environment: PyTorch 2.9.1+cu130 | CuDNN 9.13',
        'Or you can disable this check by setting env var SGLANG_DISABLE_CUDNN_CHECK=1' + RESET,
    ]),
    ('abi_mismatch', [
        '[sgl_kernel] CRITICAL: Could not load any common_ops library!',
        'ImportError: /opt/ml-env/lib/python3.12/site-packages/sgl_kernel/sm100/common_ops.abi3.so: '
        'undefined symbol: _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib',
    ]),
    ('kernel_libs_too_old', [
        'Exception: sgl-kernel is installed with version 0.3.16, which is less than the minimum required version 0.3.21.',
    ]),
    ('flashinfer_mismatch', [
        'RuntimeError: flashinfer-cubin version (0.6.3) does not match flashinfer version (0.6.4).',
    ]),
    ('kv_pool_oom', [
        '[2026-11-30 10:02:11 TP3] Scheduler hit an exception: Traceback (most recent call last):',
        'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: 0.7',
        '[2026-11-30 10:02:11] Received sigquit from a child process. It usually means the child failed.',
    ]),
    ('cuda_graph_oom', [
        '[2026-11-30 10:03:40 TP0] Scheduler hit an exception: Traceback (most recent call last):',
        'Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.',
    ]),
    ('cuda_oom', [
        '[2026-11-30 10:03:40 TP5] Scheduler hit an exception: Traceback (most recent call last):',
        'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 5 has a total capacity of 95.00 GiB',
        '[2026-11-30 10:03:40] Received sigquit from a child process. It usually means the child failed.',
    ]),
    ('nccl', [
        'torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, '
        'unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.5',
        'ncclUnhandledCudaError: Call to CUDA function failed.',
    ]),
    ('port_in_use', [
        "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
    ]),
    # socket.bind's own text, as the scheduler's ZMQ/NCCL ports and other binds raise it: capitalized.
    ('port_in_use', [
        'OSError: [Errno 98] Address already in use',
    ]),
    ('warmup_failed', [
        '[2026-11-30 10:05:00] Initialization failed. warmup error: Traceback (most recent call last):',
    ]),
    ('rank_crash', [
        '[2026-11-30 10:04:00 TP1] Scheduler hit an exception: Traceback (most recent call last):',
        '  File "/opt/ml-env/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 3185',
        'ValueError: something a rank did not expect',
        '[2026-11-30 10:04:00] Received sigquit from a child process. It usually means the child failed.',
    ]),
    ('rank_crash', ['[2026-11-30 10:04:00] Rank 3 scheduler is dead. Please check if there are relevant logs.']),
    ('rank_crash', ['SIGQUIT received. signum=None, frame=None. It usually means one child failed.']),
    # sglang 0.5.23, entrypoints/engine.py _scheduler_died_error.
    ('rank_crash', ['RuntimeError: Rank 2 scheduler died during initialization (exit code: 1). If exit code is -9 '
                    '(SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.']),
    ('rank_killed', ['RuntimeError: Rank 5 scheduler died during initialization (exit code: -9). If exit code is -9 '
                     '(SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.']),
    # SGLang wraps any RuntimeError of the capture (model_executor/cuda_graph_runner.py; 0.5.23:
    # runner/decode_cuda_graph_runner.py): the inner error names the cause, the hint always says memory.
    ('cuda_graph_nccl', [
        'torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, '
        'unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.5',
        'During handling of the above exception, another exception occurred:',
        'Exception: Capture cuda graph failed: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, '
        'unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.5',
        '2. set --cuda-graph-max-bs to a smaller value (e.g., 16)',
    ]),
    ('cuda_graph_kernel', [
        'torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device',
        'Exception: Capture cuda graph failed: CUDA error: no kernel image is available for execution on the device',
        '2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)',
    ]),
    ('cuda_graph_failed', ['Exception: Capture cuda graph failed: shape mismatch in the captured batch']),
    # A multi-node group: rank 0 lost a peer node (gloo through broadcast_pyobj, sglang#3685, #26375), a member that
    # never met the others (c10d TCPStore.cpp, socket.cpp), rank 0's rendezvous port taken.
    ('group_peer_lost', [
        '[2026-12-06 10:04:00 TP0] Scheduler hit an exception: Traceback (most recent call last):',
        '  File "/opt/ml-env/lib/python3.12/site-packages/sglang/srt/utils/common.py", line 1187, in broadcast_pyobj',
        'RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:547] Connection closed by peer [10.0.0.2]:50001',
        '[2026-12-06 10:04:00] Received sigquit from a child process. It usually means the child failed.',
    ]),
    ('group_rendezvous', ['torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients '
                          'joined.']),
    ('group_rendezvous', ['torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying '
                          'to connect to (inferops-gw-1, 50000).']),
    ('group_port_in_use', ['torch.distributed.DistNetworkError: The server socket has failed to listen on any local network '
                           'address. port: 50000, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in '
                           'use']),
    # argparse of sglang 0.5.23 (prepare_server_args: prog "sglang serve", allow_abbrev on).
    ('bad_arguments', [
        'usage: sglang serve [-h] [--model-path MODEL_PATH] [--cuda-graph-max-bs-decode CUDA_GRAPH_MAX_BS_DECODE]',
        'sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, '
        '--cuda-graph-max-bs-prefill',
    ]),
    ('bad_arguments', ['launch_server.py: error: unrecognized arguments: --no-such-option']),
    # The real 0.5.9 launcher in a release without its dependencies (pybase64: srt/utils/common.py).
    ('missing_module', [
        'Traceback (most recent call last):',
        '  File "/opt/ml-env/lib/python3.12/site-packages/sglang/srt/utils/common.py", line 53, in <module>',
        '    import pybase64',
        "ModuleNotFoundError: No module named 'pybase64'",
    ]),
]


@pytest.mark.parametrize('cause,lines', REAL_FAILURES, ids=['%s-%d' % (case[0], i) for i, case in enumerate(REAL_FAILURES)])
def test_each_real_failure_names_its_cause(cause, lines):
    scanner = SignatureScanner()
    scanner.feed([strip_ansi(line) for line in lines])
    verdict = scanner.verdict()
    assert verdict['cause'] == cause
    assert verdict['fix'] and verdict['summary']
    assert scanner.fatal


def test_the_root_cause_beats_the_crash_lines_it_drags_after_it():
    scanner = SignatureScanner()
    scanner.feed(['Received sigquit from a child process. It usually means the child failed.'])
    scanner.feed(['torch.OutOfMemoryError: CUDA out of memory.'])
    assert scanner.verdict()['cause'] == 'cuda_oom'


def test_the_abi_symbol_is_captured():
    scanner = SignatureScanner()
    scanner.feed(REAL_FAILURES[1][1])
    assert scanner.verdict()['detail'] == {'symbol': '_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib'}


def test_a_capture_failure_names_its_inner_error_not_always_memory():
    for cause, inner in (('cuda_graph_oom', 'CUDA out of memory. Tried to allocate 2.00 GiB.'),
                         ('cuda_graph_nccl', 'NCCL error in: NCCLUtils.cpp:77, unhandled system error'),
                         ('cuda_graph_kernel', 'CUDA error: an illegal memory access was encountered'),
                         ('cuda_graph_failed', 'something else')):
        scanner = SignatureScanner()
        scanner.feed(['Exception: Capture cuda graph failed: ' + inner])
        assert scanner.verdict()['cause'] == cause, inner
    assert 'memory' not in [s for s in SIGNATURES if s['cause'] == 'cuda_graph_nccl'][0]['fix']


def test_the_missing_module_is_named():
    scanner = SignatureScanner()
    scanner.feed(["ModuleNotFoundError: No module named 'pybase64'"])
    verdict = scanner.verdict()
    assert verdict['detail'] == {'module': 'pybase64'} and 'ml_env profile' in verdict['fix']


def test_the_import_warnings_of_a_healthy_start_are_not_failures():
    # models/registry.py logs every optional model module it could not import, on every start, as a
    # WARNING quoting the error: an ABI or version text inside must not fail a healthy server.
    scanner = SignatureScanner()
    scanner.feed([
        '[2026-12-04 10:00:02] Ignore import error when loading sglang.srt.models.deepseek_nextn: '
        '/opt/ml-env/lib/python3.12/site-packages/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi',
        '[2026-12-04 10:00:02] Ignore import error when loading sglang.srt.models.mllama4: transformers is installed '
        'with version 4.57.1, which is less than the minimum required version 4.58.0',
        "[2026-12-04 10:00:02] Ignore import error when loading sglang.srt.models.phi4mm: No module named 'soundfile'",
        '[2026-12-04 10:00:02] Ignore import error when loading sglang.srt.models.x: CUDA out of memory',
    ])
    assert scanner.verdict() is None and not scanner.fatal


def test_cudnn_fix_names_the_switch():
    fix = [s for s in SIGNATURES if s['cause'] == 'cudnn_guard'][0]['fix']
    assert 'SGLANG_DISABLE_CUDNN_CHECK=1' in fix


def test_healthy_start_lines_match_nothing_and_nccl_warn_is_only_a_hint():
    scanner = SignatureScanner()
    scanner.feed([
        "[2026-11-30 10:00:01] server_args=ServerArgs(model_path='/m', tp_size=8, api_key=None)",
        '[2026-11-30 10:00:20 TP0] Load weight begin. avail mem=93.12 GB',
        'Loading safetensors checkpoint shards:  50% Completed | 32/64 [00:40<00:40,  1.25s/it]',
        'node1:1234:1300 [0] NCCL INFO Channel 00/16 : 0 1 2 3 4 5 6 7',
        'node1:1234:1300 [0] misc/socket.cc:50 NCCL WARN Net : Connection closed by remote peer',
        'INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)',
        'The server is fired up and ready to roll!',
    ])
    assert scanner.verdict() is None
    assert not scanner.fatal
    assert 'nccl_warning' in scanner.hints


def test_ansi_codes_are_stripped():
    assert strip_ansi(RED + 'Not enough memory.' + RESET + '\x1b[1;32mok\x1b[0m') == 'Not enough memory.ok'
    assert strip_ansi('\x1b]0;title\x07text') == 'text'


def test_redact_masks_the_api_key_server_args_echoes_and_known_secrets():
    line = "server_args=ServerArgs(model_path='/m', api_key='s3cr3t-KEY', admin_api_key=None, port=30000)"
    out = redact(line)
    assert 's3cr3t-KEY' not in out and "api_key='********'" in out and 'admin_api_key=None' in out
    assert redact('Authorization: Bearer tok-123', ['tok-123']) == 'Authorization: Bearer ********'
    assert redact('{"api_key": "abc"}') == '{"api_key": "********"}'
    # Seen on the GPU host: batch statistics are not secrets.
    batch = '[TP0] Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00'
    assert redact(batch) == batch
