# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang stand-in behaves like sglang 0.5.9 where a launcher and a health checker look.

Most tests start `python -m sglang.launch_server` as a real process tree (conftest.Standin) with
small timings; the rest test its pure parts in-process. The 0.5.23 mode, the stop and the loads
endpoints have their own files.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from sglang.standin import args as standin_args
from sglang.standin import backends, config, faults, http, ranks, texts
from sglang.standin.settings import BadSetting, Settings

READY = 'The server is fired up and ready to roll!'
RUNNING = 'Uvicorn running on http://127.0.0.1:'
# every text a launcher's signature table matches; exit_unknown must hit none of them
SIGNATURES = (
    'CuDNN Compatibility Issue Detected', 'undefined symbol', 'is less than the minimum required version',
    'does not match flashinfer version', 'Scheduler hit an exception', 'Received sigquit', 'SIGQUIT received',
    'scheduler is dead', 'Initialization failed', 'Not enough memory', 'Capture cuda graph failed',
    'CUDA out of memory', 'NCCL error', 'NCCL WARN', 'ncclUnhandledCudaError', 'ncclSystemError', 'DistBackendError',
    'address already in use',
)


def log_lines(server):
    return server.log().splitlines()


def first_line_after(lines, text):
    return next(index for index, line in enumerate(lines) if text in line)


# -- a clean start, end to end ---------------------------------------------------------------------

def test_clean_start_phases_endpoints_and_sigterm(standin):
    server = standin(env={'SGLANG_STANDIN_LOAD_SECONDS': '1.0', 'SGLANG_STANDIN_WARMUP_SECONDS': '1.0'})
    server.wait_for('Loading safetensors checkpoint shards:')
    with pytest.raises(ConnectionRefusedError):
        server.request('GET', '/health_generate')  # the port stays closed while the ranks load

    server.wait_for(RUNNING)
    assert READY not in server.log()
    assert server.request('GET', '/health_generate')[0] == 503  # warmup: health says no
    assert server.request('GET', '/health')[0] == 503
    status, body = server.request('GET', '/v1/models')  # ... while the shallow probes say yes
    assert status == 200 and json.loads(body)['data'][0]['id'] == os.path.join(server.workdir, 'model')
    assert server.request('GET', '/ping')[0] == 200
    assert json.loads(server.request('GET', '/model_info')[1])['is_generation'] is True

    elapsed = server.wait_for(READY)
    assert 1.5 < elapsed < 8
    assert server.request('GET', '/health_generate')[0] == 200
    assert server.request('GET', '/health')[0] == 200
    sampling = {'max_new_tokens': 8, 'temperature': 0}
    status, body = server.request('POST', '/generate', {'text': 'Hello', 'sampling_params': sampling})
    meta = json.loads(body)['meta_info']
    assert status == 200 and meta['completion_tokens'] == 8 and meta['prompt_tokens'] >= 1
    status, body = server.request('POST', '/v1/completions', {'prompt': 'Hi', 'max_tokens': 3})
    assert status == 200 and json.loads(body)['usage']['completion_tokens'] == 3
    status, body = server.request('POST', '/v1/chat/completions',
                                  {'messages': [{'role': 'user', 'content': 'Hi'}], 'max_tokens': 2})
    assert status == 200 and json.loads(body)['choices'][0]['message']['role'] == 'assistant'
    assert server.request('GET', '/metrics')[0] == 404  # no --enable-metrics
    assert server.request('GET', '/no/such/route')[0] == 404

    lines = log_lines(server)
    assert lines[0].endswith(")") and re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] server_args=ServerArgs\("
                                               r"model_path='", lines[0])
    assert re.search(r'^\[[0-9: -]+\] INFO:     127\.0\.0\.1:\d+ - "POST /generate HTTP/1\.1" 200 OK$',
                     server.log(), re.MULTILINE)
    assert len(server.pids()) == 2  # the main process and its one rank

    # sglang 0.5.9 after its first request: drain at the watchdog's next tick, then SIGKILL to itself
    status, took = server.terminate()
    assert status == -9 and took < 2
    assert 'SIGTERM received. signum=None frame=None. Draining requests and shutting down...' in server.log()
    assert 'Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].' in server.log()
    server.assert_gone()


def test_ranks_share_the_process_group_and_die_with_the_main_process(standin):
    server = standin(['--tp', '2'])
    server.wait_for(READY)
    pids = server.pids()
    assert len(pids) == 3
    groups = {os.getpgid(pid) for pid in pids}
    assert groups == {os.getpgid(server.proc.pid)}
    assert re.search(r'\[[0-9: -]+ TP1\] Load weight end', server.log())
    os.kill(server.proc.pid, signal.SIGKILL)  # no handler runs: the kernel's parent-death signal must act
    server.proc.wait()
    server.assert_gone()


@pytest.mark.parametrize('phase', ['Load weight begin', RUNNING, READY])
def test_simplified_sigterm_exits_clean_in_each_phase(standin, phase):
    # SGLANG_STANDIN_REAL_SIGTERM=0: the stand-in's former default, kept for callers that want it
    server = standin(['--tp', '2'], env={'SGLANG_STANDIN_LOAD_SECONDS': '1', 'SGLANG_STANDIN_WARMUP_SECONDS': '1',
                                         'SGLANG_STANDIN_REAL_SIGTERM': '0'})
    server.wait_for(phase)
    status, took = server.terminate()
    assert status == 0 and took < 2
    server.assert_gone()


def test_a_killed_rank_makes_health_fail_after_the_timeout(standin):
    server = standin(['--tp', '2'], env={'SGLANG_HEALTH_CHECK_TIMEOUT': '1'})
    server.wait_for(READY)
    rank = [pid for pid in server.pids() if pid != server.proc.pid][-1]
    os.kill(rank, signal.SIGKILL)  # an OOM kill: no exception, no SIGQUIT
    time.sleep(0.3)
    tic = time.monotonic()
    assert server.request('GET', '/health_generate')[0] == 503
    assert 0.9 < time.monotonic() - tic < 3
    assert "Health check failed. Server couldn't get a response from detokenizer for last 1 seconds." in server.log()
    # the drain does not wait for a server whose health check failed
    assert server.terminate()[0] == -9
    assert 'Signal SIGTERM received while health check failed. Force exiting.' in server.log()
    server.assert_gone()


def test_a_busy_server_is_healthy_while_other_requests_progress(standin):
    # http_server.health_generate passes once *any* answer came back since it started, looked at
    # every second: its own one-token request may wait behind others for longer than the timeout.
    server = standin(env={'SGLANG_HEALTH_CHECK_TIMEOUT': '2', 'SGLANG_STANDIN_TOKEN_SECONDS': '0.05'})
    server.wait_for(READY)
    body = {'text': 'Hi', 'sampling_params': {'max_new_tokens': 10}}  # 0.5 s each, one at a time
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        busy = [pool.submit(server.request, 'POST', '/generate', body, None, 30) for dummy in range(12)]
        time.sleep(0.3)
        tic = time.monotonic()
        assert server.request('GET', '/health_generate')[0] == 200  # 6 s of requests ahead of its own
        assert 0.9 < time.monotonic() - tic < 2  # at its first look, a second in: the others answered
        assert [future.result()[0] for future in busy] == [200] * 12
    assert "Health check failed" not in server.log()
    server.terminate()


def test_rank_env_is_logged(standin):
    env = {'NCCL_P2P_DISABLE': '1', 'CUDA_HOME': '/usr/local/cuda-12.8', 'NCCL_CUMEM_ENABLE': '1'}
    server = standin(['--tp', '2'], env=env)
    server.wait_for(READY)
    seen = [line for line in log_lines(server) if 'sees:' in line]
    assert len(seen) == 2 and all(' TP' in line for line in seen)
    for line in seen:
        # set by the environment, kept; NCCL_NVLS_ENABLE defaulted by the server like the real one
        assert 'NCCL_CUMEM_ENABLE=1' in line and 'NCCL_NVLS_ENABLE=0' in line and 'NCCL_P2P_DISABLE=1' in line
        assert 'CUDA_HOME=/usr/local/cuda-12.8' in line and 'TRITON_PTXAS_PATH=<unset>' in line
    server.terminate()


def test_skip_server_warmup_is_ready_at_once(standin):
    server = standin(['--skip-server-warmup'], env={'SGLANG_STANDIN_WARMUP_SECONDS': '30'})
    server.wait_for(RUNNING)
    server.wait_for(READY, timeout=2)  # sglang 0.5.9 prints it with --skip-server-warmup as well
    assert server.request('GET', '/health_generate')[0] == 200
    assert '"POST /generate' not in server.log()
    server.terminate()


def test_capture_bar_lasts_the_capture_seconds(standin):
    # tqdm on TP rank 0 only, `\r` before each refresh, one newline when it closes
    server = standin(env={'SGLANG_STANDIN_CAPTURE_SECONDS': '0.6'})
    server.wait_for(READY)
    log = server.raw_log()
    begin = log.index('Capture cuda graph begin.')
    meter = log[log.index('\r', begin):log.rindex('\n', 0, log.index('Capture cuda graph end.')) + 1]
    assert '\n' not in meter.rstrip('\n') and meter.endswith('\n')
    updates = meter.rstrip('\n').split('\r')[1:]
    assert updates[0].startswith('  0%|          | 0/36 [00:00<?, ?it/s]')  # drawn before the first description
    assert updates[1].startswith('Capturing batches (bs=256 avail_mem=') and len(updates) == 36 + 2
    assert re.match(r'^Capturing batches \(bs=1 avail_mem=\d+\.\d\d GB\): 100%\|\u2588{10}\| 36/36 '
                    r'\[00:00<00:00, +\d+\.\d\dit/s\]$', updates[-1]), updates[-1]
    elapsed = float(re.search(r'Capture cuda graph end\. Time elapsed: ([0-9.]+) s', log).group(1))
    assert elapsed >= 0.55
    server.terminate()


# -- auth, metrics, --config ---------------------------------------------------------------------

def test_config_file_api_key_and_metrics(standin, tmp_path, a_port):
    config_file = tmp_path / 'sglang.yaml'
    # port 1 in the file loses to --port on the command line, as in sglang's merger
    config_file.write_text('# written by the role\napi-key: "s3cret-key"\nenable-metrics: true\nport: 1\n'
                           'served-model-name: demo\n')
    port = a_port
    server = standin(['--model-path', str(tmp_path / 'model'), '--config', str(config_file), '--port', str(port)],
                     model_args=False, port=port)
    server.wait_for(READY)
    key = 's3cret-key'
    assert server.request('GET', '/v1/models')[0] == 401
    assert json.loads(server.request('GET', '/v1/models')[1]) == {'error': 'Unauthorized'}
    assert server.request('GET', '/v1/models', key='wrong')[0] == 401
    status, body = server.request('GET', '/v1/models', key=key)
    assert status == 200 and json.loads(body)['data'][0]['id'] == 'demo'
    assert server.request('POST', '/generate', {'text': 'x'})[0] == 401
    assert server.request('GET', '/health_generate')[0] == 200  # /health* need no key
    status, body = server.request('GET', '/metrics')  # neither does /metrics
    assert status == 200 and 'sglang:generation_tokens_total{model_name="demo"}' in body
    assert json.loads(server.request('GET', '/server_info', key=key)[1])['api_key'] == key
    with open('/proc/%d/cmdline' % server.proc.pid, 'rb') as handle:
        assert key.encode() not in handle.read()
    assert "api_key='s3cret-key'" in log_lines(server)[0]  # the real server_args line prints it too
    server.terminate()


# -- multi-node --------------------------------------------------------------------------------

def test_node_rank_one_runs_a_dummy_health_server(node, a_port):
    node(0, a_port, ['--api-key', 'k'], tp=4)  # rank 0 of the launch: the follower's ranks meet it first
    server = node(1, a_port, ['--api-key', 'k'], tp=4)
    server.wait_for('Dummy health check server started in background thread at 127.0.0.1:%d' % server.port)
    for path in ('/health', '/health_generate', '/ping'):
        assert server.request('GET', path)[0] == 200
    assert server.request('GET', '/v1/models')[0] == 404
    log = server.log()
    assert RUNNING not in log and READY not in log
    assert ' TP2] ' in log and ' TP3] ' in log and ' TP0] ' not in log
    assert len(server.pids()) == 3
    # 0.5.9's follower has no SIGTERM handler: the signal's default action, the ranks by PDEATHSIG
    status, took = server.terminate()
    assert status == -signal.SIGTERM and took < 2
    server.assert_gone()


# -- faults ----------------------------------------------------------------------------------------

# fault -> (exit status, texts in the log, whether the port opened)
EXITS = {
    'cudnn_guard': (1, ['PyTorch 2.9.1 & CuDNN Compatibility Issue Detected',
                        'Or you can disable this check by setting env var SGLANG_DISABLE_CUDNN_CHECK=1'], False),
    'abi': (1, ['[sgl_kernel] CRITICAL: Could not load any common_ops library!',
                'undefined symbol: _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib'], False),
    'kernel_too_old': (1, ['sgl-kernel is installed with version 0.3.20, which is less than the minimum required '
                           'version 0.3.21'], False),
    'flashinfer_mismatch': (1, ['RuntimeError: flashinfer-cubin version (0.6.4) does not match flashinfer '
                                'version (0.6.3)'], False),
    'rank_crash': (-9, ['Scheduler hit an exception: Traceback',
                        'Received sigquit from a child process. It usually means the child failed.'], False),
    # run_scheduler_process SIGQUITs the parent for any exception, this one too
    'kv_oom': (-9, ['Scheduler hit an exception: Traceback', 'RuntimeError: Not enough memory. Please try to increase '
                    '--mem-fraction-static. Current value: self.server_args.mem_fraction_static=0.88',
                    'Received sigquit from a child process. It usually means the child failed.'], False),
    # killed from outside (the OOM killer): no SIGQUIT, the pipe closes
    'rank_killed': (1, ['Rank 0 scheduler is dead. Please check if there are relevant logs.', 'Exit code: -9',
                        'EOFError'], False),
    'graph_oom': (-9, ['Capture cuda graph failed:', 'torch.OutOfMemoryError: CUDA out of memory',
                       'Received sigquit from a child process.'], False),
    'capture_nccl': (-9, ['RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)',
                          'During handling of the above exception, another exception occurred:',
                          'Exception: Capture cuda graph failed: NCCL error: unhandled cuda error',
                          '2. set --cuda-graph-max-bs to a smaller value (e.g., 16)',
                          'Received sigquit from a child process.'], False),
    'capture_kernel': (-9, ['torch.AcceleratorError: CUDA error: no kernel image is available for execution on the '
                            'device', 'During handling of the above exception, another exception occurred:',
                            'Exception: Capture cuda graph failed: CUDA error: no kernel image is available',
                            'Received sigquit from a child process.'], False),
    'missing_module': (1, ["ModuleNotFoundError: No module named 'pybase64'"], False),
    'nccl_error': (-9, ['NCCL WARN', 'torch.distributed.DistBackendError: NCCL error in:', 'ncclUnhandledCudaError',
                        'Received sigquit from a child process.'], False),
    'warmup_failed': (-9, ['Initialization failed. warmup error: Traceback'], True),
    'crash_after_ready': (-9, [READY, 'Scheduler hit an exception:',
                               'SIGQUIT received. signum=None, frame=None. It usually means one child failed.'], True),
    # It exits after its delay in whatever phase it reached: the port may or may not be open by then.
    'exit_unknown': (3, [], None),
}


@pytest.mark.parametrize('fault', sorted(EXITS))
def test_fault_prints_its_signature_exits_and_leaves_nothing(standin, fault):
    status, needles, port_opened = EXITS[fault]
    server = standin(['--tp', '2'], env={'SGLANG_STANDIN_FAULT': fault})
    assert server.wait_exit() == status
    log = server.log()
    for needle in needles:
        assert needle in log
    if port_opened is not None:
        assert (RUNNING in log) is port_opened
    if fault == 'exit_unknown':
        # the model registry's import warnings quote failure-looking texts on every start, as the real ones do
        lines = [line for line in log.splitlines() if 'Ignore import error when loading ' not in line]
        assert not [needle for needle in SIGNATURES if needle in '\n'.join(lines)]
    if fault != 'crash_after_ready':
        assert READY not in log
    if fault in ('cudnn_guard', 'abi', 'kernel_too_old', 'flashinfer_mismatch', 'missing_module'):
        assert 'server_args=' not in log  # the real checks fire before that line
        assert time.monotonic() - server.started < 3
    if fault == 'missing_module':
        assert log.rstrip().endswith("ModuleNotFoundError: No module named 'pybase64'")
        assert log.startswith('Traceback (most recent call last):')
    server.assert_gone()


def test_hang_prints_nothing_after_server_args_and_stops_on_sigterm(standin):
    server = standin(['--tp', '2'], env={'SGLANG_STANDIN_FAULT': 'hang'})
    server.wait_for('server_args=')
    time.sleep(1.2)  # three times the load time
    assert len(log_lines(server)) == 1 and server.proc.poll() is None
    with pytest.raises(ConnectionRefusedError):
        server.request('GET', '/health')
    assert len(server.pids()) == 3
    status, took = server.terminate()  # during load: no handler, the default action
    assert status == -signal.SIGTERM and took < 2
    server.assert_gone()


def test_unhealthy_opens_the_port_and_answers_503_forever(standin):
    server = standin(env={'SGLANG_STANDIN_FAULT': 'unhealthy'})
    server.wait_for(RUNNING)
    time.sleep(1.0)
    for _attempt in range(3):
        assert server.request('GET', '/health_generate')[0] == 503
    assert server.request('GET', '/v1/models')[0] == 200
    assert READY not in server.log() and server.proc.poll() is None
    # The warmup request never finishes: the drain waits for it forever (a stop needs SIGKILL).
    server.proc.send_signal(signal.SIGTERM)
    server.wait_for("Gracefully exiting... Remaining number of requests 1. Remaining requests remaining_rids=['")
    time.sleep(0.5)
    assert server.proc.poll() is None
    assert server.log().count('Remaining number of requests 1.') >= 2  # every poll
    server.kill_all()
    server.assert_gone()


def test_fault_from_the_fault_file(standin, tmp_path):
    fault_file = tmp_path / 'fault'
    fault_file.write_text('kernel_too_old\nignored second line\n')
    server = standin(env={'SGLANG_STANDIN_FAULT_FILE': str(fault_file)})
    assert server.wait_exit() == 1 and 'less than the minimum required version' in server.log()


def test_unknown_fault_name_exits_2(standin):
    server = standin(env={'SGLANG_STANDIN_FAULT': 'no_such_fault'})
    assert server.wait_exit() == 2 and "unknown fault 'no_such_fault'" in server.log()


def test_the_real_bypass_variable_disables_the_cudnn_guard(standin):
    server = standin(env={'SGLANG_STANDIN_FAULT': 'cudnn_guard', 'SGLANG_DISABLE_CUDNN_CHECK': '1'})
    server.wait_for(READY)
    server.terminate()


# -- port and arguments ----------------------------------------------------------------------------

@pytest.mark.parametrize('extra, status', [([], -9), (['--skip-server-warmup'], 1)])
def test_taken_port_fails_the_bind_with_the_uvicorn_text(standin, extra, status):
    holder = socket.socket()
    holder.bind(('127.0.0.1', 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        server = standin(['--tp', '2'] + extra, port=port)
        assert server.wait_exit() == status
    finally:
        holder.close()
    log = server.log()
    expected = ("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', %d): "
                "address already in use" % port)
    assert expected in log
    if not extra:
        # the warmup thread keeps polling /model_info, then gives up and kills the tree
        assert 'Initialization failed. warmup error:' in log
    server.assert_gone()


@pytest.mark.parametrize('argv, message', [
    (['--bogus'], 'error: unrecognized arguments: --bogus'),
    (['--pp', '2'], 'error: ambiguous option: --pp could match --pp-size, --pp-max-micro-batch-size'),
    (['--port', 'x'], "error: argument --port: invalid int value: 'x'"),
])
def test_bad_arguments_exit_2(standin, argv, message):
    server = standin(argv)
    assert server.wait_exit() == 2 and message in server.log()
    server.assert_gone(0)


def test_missing_model_path_exits_2(standin):
    server = standin(['--port', '1'], model_args=False)
    assert server.wait_exit() == 2
    assert 'the following arguments are required: --model-path/--model' in server.log()


# -- the pure parts ------------------------------------------------------------------------------

def test_argument_names_aliases_and_repr():
    parsed = standin_args.prepare_server_args(['--model', '/m', '--tp', '8', '--cuda-graph-max-bs', '128',
                                               '--disable-custom-all-reduce', '--enable-metrics'])
    assert (parsed.tp_size, parsed.cuda_graph_max_bs, parsed.disable_custom_all_reduce) == (8, 128, True)
    assert parsed.served_model_name == '/m' and parsed.tokenizer_path == '/m'
    assert repr(parsed).startswith("ServerArgs(model_path='/m', tokenizer_path='/m', ")
    assert standin_args.prepare_server_args(['--model-path', '/m', '--tensor-parallel-size', '2']).tp_size == 2


def test_served_model_name_with_a_colon_is_refused():
    parsed = standin_args.prepare_server_args(['--model-path', '/m', '--served-model-name', 'a:b'])
    with pytest.raises(AssertionError, match="served_model_name cannot contain a colon"):
        parsed.check_server_args()


def test_config_merge_order_and_types(tmp_path):
    path = tmp_path / 'c.yaml'
    path.write_text('api-key: k1\nport: 8000\ntrust-remote-code: true\nenable-metrics: false\n'
                    'mem-fraction-static: 0.8\n')
    parser = standin_args.build_parser()
    merged = config.ConfigArgumentMerger(parser).merge_config_with_args(['--model-path', '/m', '--config', str(path),
                                                                         '--port', '9000'])
    assert merged == ['--api-key', 'k1', '--port', '8000', '--trust-remote-code', '--mem-fraction-static', '0.8',
                      '--model-path', '/m', '--port', '9000']
    parsed = standin_args.prepare_server_args(['--model-path', '/m', '--config', str(path), '--port', '9000'])
    assert (parsed.api_key, parsed.port, parsed.trust_remote_code) == ('k1', 9000, True)


@pytest.mark.parametrize('name, message', [('c.json', 'Config file must be YAML format, got: .json'),
                                           ('absent.yaml', 'Config file not found')])
def test_config_file_errors(tmp_path, name, message):
    if name.endswith('.json'):
        (tmp_path / name).write_text('{}')
    with pytest.raises(ValueError, match=re.escape(message)):
        standin_args.prepare_server_args(['--model-path', '/m', '--config', str(tmp_path / name)])


FLAT_YAML = """\
# comment
api-key: "a#b c"   # trailing comment
served-model-name: 'it''s'
port: 30001
mem-fraction-static: 0.85
trust-remote-code: yes
enable-metrics: off
log-level: ~
dist-init-addr: 10.0.0.1:5000
plain: a # b
numbers: [1, 2]
block:
  - x
  - 2
empty:
"""


def test_fallback_yaml_parser_types_like_pyyaml():
    expected = {'api-key': 'a#b c', 'served-model-name': "it's", 'port': 30001, 'mem-fraction-static': 0.85,
                'trust-remote-code': True, 'enable-metrics': False, 'log-level': None,
                'dist-init-addr': '10.0.0.1:5000', 'plain': 'a', 'numbers': [1, 2], 'block': ['x', 2], 'empty': None}
    assert config.parse_flat_yaml(FLAT_YAML) == expected
    if importlib.util.find_spec('yaml'):
        import yaml
        assert yaml.safe_load(FLAT_YAML) == expected


def test_rank_plan_follows_sglang_numbering():
    parsed = standin_args.prepare_server_args(['--model-path', '/m', '--tp', '4', '--nnodes', '2', '--node-rank', '1'])
    assert ranks.plan(parsed) == [
        {'tp_rank': 2, 'pp_rank': 0, 'gpu_id': 0, 'global_rank': 2},
        {'tp_rank': 3, 'pp_rank': 0, 'gpu_id': 1, 'global_rank': 3},
    ]
    parsed = standin_args.prepare_server_args(['--model-path', '/m', '--tp-size', '2', '--pp-size', '2',
                                               '--base-gpu-id', '4'])
    assert [r['gpu_id'] for r in ranks.plan(parsed)] == [4, 5, 6, 7]
    assert [r['global_rank'] for r in ranks.plan(parsed)] == [0, 1, 2, 3]


@pytest.mark.parametrize('method, path, header, allowed', [
    ('GET', '/v1/models', None, False),
    ('GET', '/v1/models', 'Bearer k', True),
    ('GET', '/v1/models', 'bearer k', True),
    ('GET', '/v1/models', 'Bearer x', False),
    ('GET', '/v1/models', 'Basic k', False),
    ('GET', '/health', None, True),
    ('GET', '/health_generate', None, True),
    ('GET', '/metrics', None, True),
    ('OPTIONS', '/generate', None, True),
    ('POST', '/generate', None, False),
])
def test_auth_rule(method, path, header, allowed):
    assert http.allowed(method, path, header, 'k') is allowed
    assert http.allowed(method, path, header, None) is True


def test_fault_reading(tmp_path):
    assert faults.read_fault({'SGLANG_STANDIN_FAULT_FILE': str(tmp_path / 'absent')}) == ''
    (tmp_path / 'f').write_text('  hang  \n')
    assert faults.read_fault({'SGLANG_STANDIN_FAULT_FILE': str(tmp_path / 'f')}) == 'hang'
    assert faults.read_fault({'SGLANG_STANDIN_FAULT': 'abi', 'SGLANG_STANDIN_FAULT_FILE': str(tmp_path / 'f')}) == 'abi'
    assert faults.read_fault({'SGLANG_STANDIN_FAULT': 'none'}) == ''
    with pytest.raises(faults.UnknownFault):
        faults.read_fault({'SGLANG_STANDIN_FAULT': 'typo'})


def test_texts_match_the_reference():
    # the reference's signature table, verbatim
    assert texts.KV_OOM.startswith('Not enough memory. Please try to increase --mem-fraction-static.')
    assert texts.GRAPH_FAILED.startswith('Capture cuda graph failed: ')
    assert texts.LAUNCH_SIGQUIT == 'Received sigquit from a child process. It usually means the child failed.'
    assert 'undefined symbol: {symbol}' in texts.SGL_KERNEL_CRITICAL
    assert texts.ABI_SYMBOL == '_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib'


def test_gpu_mode_is_optional():
    assert backends.detect_gpu('0', 8) == (False, 'SGLANG_STANDIN_GPU=0')
    assert backends.detect_gpu('1', 8)[0] is True
    use, reason = backends.detect_gpu('auto', 1)
    if importlib.util.find_spec('torch') is None:
        assert (use, reason) == (False, 'torch is not importable')
    env = backends.seen_env({'NCCL_DEBUG': 'INFO', 'CUDA_HOME': '/c', 'PATH': '/bin'})
    assert env == 'NCCL_DEBUG=INFO CUDA_HOME=/c TRITON_PTXAS_PATH=<unset>'


# A torch that records what GPU mode asks of it: the GPU code paths run without GPUs.
FAKE_TORCH = {
    '__init__.py': """
import os
import sys

int64, uint8, bfloat16 = 'int64', 'uint8', 'bfloat16'


def note(text):
    sys.stderr.write('fake torch pid %d: %s\\n' % (os.getpid(), text))
    sys.stderr.flush()


class Tensor:
    def __init__(self, values, shape=None):
        self.values = list(values)
        self.shape = shape or (len(self.values),)

    def item(self):
        return self.values[0]


def tensor(values, dtype=None):
    return Tensor(values)


def ones(count, device=None):
    return Tensor([1] * count)


def zeros(shape, dtype=None, device=None):
    return Tensor([0], tuple(shape))


def empty(count, dtype=None, device=None):
    note('empty %d bytes on cuda:%s' % (count, cuda.current))
    return Tensor([0])


from torch import cuda, distributed  # noqa: E402
""",
    'cuda.py': """
import os

current = None


def is_available():
    return True


def device_count():
    return int(os.environ.get('FAKE_TORCH_GPUS', '8'))


def set_device(index):
    global current
    current = index


def mem_get_info(index=None):
    return 70 << 30, 80 << 30


def get_device_name(index=None):
    return 'NVIDIA FAKE'


def synchronize():
    pass
""",
    'distributed.py': """
import time

import torch

STATE = {}


def init_process_group(backend, init_method, world_size, rank, timeout=None):
    STATE['rank'] = rank
    torch.note('init_process_group backend=%s init_method=%s world_size=%d rank=%d'
               % (backend, init_method, world_size, rank))


def new_group(backend=None, timeout=None):
    return backend


def all_reduce(tensor):
    torch.note('all_reduce on cuda:%s of %s' % (torch.cuda.current, 'x'.join(map(str, tensor.shape))))


def broadcast(tensor, src=0, group=None):
    while STATE['rank'] != src:
        time.sleep(3600)  # a follower waits for rank 0, which this fake never delivers
""",
}


@pytest.fixture
def fake_torch(tmp_path):
    package = tmp_path / 'fake_torch' / 'torch'
    package.mkdir(parents=True)
    for name, source in FAKE_TORCH.items():
        (package / name).write_text(source.lstrip())
    return str(package.parent)


def test_gpu_mode_code_paths_with_a_fake_torch(standin, fake_torch):
    server = standin(['--tp', '2', '--dist-init-addr', '10.1.2.3:5000'],
                     env={'PYTHONPATH': fake_torch, 'SGLANG_STANDIN_GPU': 'auto', 'SGLANG_STANDIN_GPU_MEM_GIB': '0.5'})
    server.wait_for(READY)
    log = server.log()
    assert log.count('(gpu mode: 8 GPU(s) visible)') == 2
    for rank in (0, 1):
        assert ('init_process_group backend=nccl init_method=tcp://10.1.2.3:5000 world_size=2 rank=%d' % rank) in log
        assert 'holds 0.50 GiB of GPU memory on cuda:%d' % rank in log
        assert 'empty %d bytes on cuda:%d' % (1 << 29, rank) in log
    lead = [line for line in log.splitlines() if 'all_reduce on cuda:0' in line]
    status, _body = server.request('POST', '/generate', {'text': 'x', 'sampling_params': {'max_new_tokens': 5}})
    assert status == 200
    time.sleep(0.1)
    assert server.log().count('all_reduce on cuda:0') == len(lead) + 5  # one all_reduce per token
    assert server.terminate()[0] == -9
    server.assert_gone()


def test_gpu_mode_decode_step_is_layers_all_reduces_of_a_hidden_wide_tensor(standin, fake_torch):
    server = standin(['--tp', '2'], env={'PYTHONPATH': fake_torch, 'SGLANG_STANDIN_GPU': '1',
                                         'SGLANG_STANDIN_GPU_MEM_GIB': '0.5', 'SGLANG_STANDIN_LAYERS': '3',
                                         'SGLANG_STANDIN_HIDDEN': '7168'})
    server.wait_for(READY)
    for rank in (0, 1):
        assert 'rank %d decodes 3 all_reduce(s) of a 1 x 7168 bfloat16 tensor per token' % rank in server.log()
    before = server.log().count('all_reduce on cuda:0 of 1x7168')
    status, _body = server.request('POST', '/generate', {'text': 'x', 'sampling_params': {'max_new_tokens': 5}})
    assert status == 200
    time.sleep(0.1)
    assert server.log().count('all_reduce on cuda:0 of 1x7168') == before + 5 * 3  # 3 layers a token
    assert server.terminate()[0] == -9
    server.assert_gone()


def test_decode_step_defaults_and_refusals():
    assert (Settings({}).layers, Settings({}).hidden) == (1, 1)  # one one-element all_reduce a token
    decode = Settings({'SGLANG_STANDIN_LAYERS': ' 60 ', 'SGLANG_STANDIN_HIDDEN': '7168'})
    assert (decode.layers, decode.hidden) == (60, 7168)
    assert Settings({'SGLANG_STANDIN_LAYERS': ''}).layers == 1  # empty is unset, as for the other knobs
    for bad in ('0', '-1', '2.5', 'x'):
        with pytest.raises(BadSetting, match='SGLANG_STANDIN_LAYERS must be a positive integer'):
            Settings({'SGLANG_STANDIN_LAYERS': bad})
        with pytest.raises(BadSetting, match='SGLANG_STANDIN_HIDDEN must be a positive integer'):
            Settings({'SGLANG_STANDIN_HIDDEN': bad})


def test_cpu_mode_accepts_the_decode_step_and_refuses_a_bad_one(standin):
    good = standin(env={'SGLANG_STANDIN_LAYERS': '60', 'SGLANG_STANDIN_HIDDEN': '7168'})
    good.wait_for(READY)
    status, body = good.request('POST', '/generate', {'text': 'x', 'sampling_params': {'max_new_tokens': 4}})
    assert status == 200 and json.loads(body)['meta_info']['completion_tokens'] == 4
    assert 'decodes' not in good.log()  # CPU mode has no all_reduce to repeat
    assert good.terminate()[0] == -9
    bad = standin(env={'SGLANG_STANDIN_LAYERS': 'sixty'})
    assert bad.wait_exit() == 2
    assert "SGLANG_STANDIN_LAYERS must be a positive integer, got 'sixty'" in bad.log()
    assert 'server_args=' not in bad.log()
    bad.assert_gone()


def test_auto_falls_back_to_cpu_mode_when_gpus_are_missing(standin, fake_torch):
    server = standin(['--tp', '2'], env={'PYTHONPATH': fake_torch, 'SGLANG_STANDIN_GPU': 'auto',
                                         'FAKE_TORCH_GPUS': '1'})
    server.wait_for(READY)
    assert server.log().count('(cpu mode: 1 GPU(s) visible, 2 needed)') == 2
    assert 'init_process_group' not in server.log()
    server.terminate()


def _cuda_devices():
    if importlib.util.find_spec('torch') is None:
        return 0
    probe = subprocess.run([sys.executable, '-c', 'import torch; print(torch.cuda.device_count())'],
                           capture_output=True, text=True, timeout=120, check=False)
    return int(probe.stdout.strip() or 0) if probe.returncode == 0 else 0


@pytest.mark.skipif(_cuda_devices() < 1, reason='GPU mode needs torch with CUDA')
def test_gpu_mode_holds_memory_and_all_reduces(standin):
    tp = min(2, _cuda_devices())
    server = standin(['--tp', str(tp)], env={'SGLANG_STANDIN_GPU': '1', 'SGLANG_STANDIN_GPU_MEM_GIB': '0.25',
                                             'SGLANG_STANDIN_LAYERS': '4', 'SGLANG_STANDIN_HIDDEN': '7168'})
    server.wait_for(READY, timeout=120)
    assert 'holds 0.25 GiB of GPU memory on cuda:0' in server.log()
    assert 'decodes 4 all_reduce(s) of a 1 x 7168 bfloat16 tensor per token' in server.log()
    status, body = server.request('POST', '/generate', {'text': 'x', 'sampling_params': {'max_new_tokens': 4}})
    assert status == 200 and json.loads(body)['meta_info']['completion_tokens'] == 4
    assert server.request('GET', '/health_generate')[0] == 200
    status, took = server.terminate(timeout=10)
    assert status == -9
    server.assert_gone(5)
