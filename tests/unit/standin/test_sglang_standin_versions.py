# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLANG_STANDIN_VERSION: the stand-in plays sglang 0.5.9 (default) or 0.5.23 where they differ."""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest

from sglang.standin import args as standin_args
from sglang.standin import capture, versions

READY = 'The server is fired up and ready to roll!'
NEW = {'SGLANG_STANDIN_VERSION': '0.5.23'}


def test_version_setting_values():
    assert versions.read_version({}) == '0.5.9'
    assert versions.read_version({'SGLANG_STANDIN_VERSION': ' 0.5.23 '}) == '0.5.23'
    with pytest.raises(versions.UnknownVersion) as raised:
        versions.read_version({'SGLANG_STANDIN_VERSION': '0.5.10'})
    assert str(raised.value) == ("sglang stand-in: SGLANG_STANDIN_VERSION='0.5.10' is not a release it plays; "
                                 "allowed: 0.5.9, 0.5.23")


def test_unknown_version_exits_2_before_anything(standin):
    server = standin(env={'SGLANG_STANDIN_VERSION': 'latest'})
    assert server.wait_exit() == 2
    assert "SGLANG_STANDIN_VERSION='latest' is not a release it plays; allowed: 0.5.9, 0.5.23" in server.log()
    assert 'server_args=' not in server.log()
    server.assert_gone(0)


@pytest.mark.parametrize('option', ['--cuda-graph-max-bs', '--cuda-graph-bs'])
def test_0_5_23_has_only_the_per_phase_graph_options(option, capsys):
    # 0.5.9 takes the old names ...
    parsed = standin_args.prepare_server_args(['--model', '/m', option, '128'], '0.5.9')
    assert 128 in (parsed.cuda_graph_max_bs, (parsed.cuda_graph_bs or [None])[0])
    # ... 0.5.23 has no alias: argparse (allow_abbrev) finds two options the old name abbreviates
    with pytest.raises(SystemExit) as raised:
        standin_args.prepare_server_args(['--model', '/m', option, '128'], '0.5.23')
    assert raised.value.code == 2
    assert ('sglang serve: error: ambiguous option: %s could match %s-decode, %s-prefill' % (option, option, option)
            in capsys.readouterr().err)
    parsed = standin_args.prepare_server_args(['--model', '/m', option + '-decode', '64'], '0.5.23')
    assert 64 in (parsed.cuda_graph_max_bs_decode, (parsed.cuda_graph_bs_decode or [None])[0])


def test_start_marker_by_release():
    old = standin_args.prepare_server_args(['--model', '/m', '--api-key', 'K'], '0.5.9')
    assert old.start_marker().startswith("server_args=ServerArgs(model_path='/m', tokenizer_path='/m', ")
    assert "api_key='K'" in old.start_marker() and 'cuda_graph_max_bs=256' in old.start_marker()
    new = standin_args.prepare_server_args(['--model', '/m', '--api-key', 'K'], '0.5.23')
    marker = new.start_marker()
    assert marker.startswith("server_args={'model_path': '/m', 'tokenizer_path': '/m', ")
    # only watermark secrets are redacted: the API key stays in clear
    assert "'api_key': 'K'" in marker and "'cuda_graph_max_bs_decode': 256" in marker
    assert 'cuda_graph_max_bs' + "'" not in marker and marker.endswith("'enable_dp_attention': False}")


def test_capture_sizes_by_release():
    old = standin_args.prepare_server_args(['--model', '/m', '--cuda-graph-max-bs', '48'], '0.5.9')
    assert capture.decode_sizes(old) == [1, 2, 4, 8, 12, 16, 24, 32, 40, 48]
    assert capture.prefill_sizes(old) == []
    new = standin_args.prepare_server_args(['--model', '/m', '--cuda-graph-max-bs-decode', '50'], '0.5.23')
    assert capture.decode_sizes(new)[-2:] == [48, 50]  # 0.5.23 appends max_bs
    assert capture.prefill_sizes(new)[:3] == [4, 8, 12] and capture.prefill_sizes(new)[-1] == 2048
    off = standin_args.prepare_server_args(['--model', '/m', '--cuda-graph-backend-prefill', 'disabled'], '0.5.23')
    assert capture.prefill_sizes(off) == []


def test_0_5_23_refuses_the_removed_option_at_start(standin):
    server = standin(['--cuda-graph-max-bs', '128'], env=NEW)
    assert server.wait_exit() == 2
    log = server.log()
    assert log.startswith('/') and "UserWarning: 'python -m sglang.launch_server' is still supported" in log
    assert ('sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, '
            '--cuda-graph-max-bs-prefill') in log
    server.assert_gone(0)


def test_0_5_23_start_loads_and_stop(standin):
    server = standin(['--tp', '2', '--api-key', 'K', '--enable-metrics'],
                     env=dict(NEW, SGLANG_STANDIN_TOKEN_SECONDS='0.005', SGLANG_STANDIN_CAPTURE_SECONDS='0.4'))
    server.wait_for(READY)
    log = server.log()
    assert "server_args={'model_path': '" in log and "'api_key': 'K'" in log
    assert 'Init torch distributed' not in log and 'dtype=torch.bfloat16' not in log
    assert 'KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1048576' in log
    for text in ('Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[4, 8, 12',
                 'Capturing prefill shape (num_tokens=2048 avail_mem=', 'Capture target prefill CUDA graph end.',
                 'Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=',
                 'Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 12, 16, 24',
                 'Ignore import error when loading sglang.srt.models.midashenglm: ', 'undefined symbol: '):
        assert text in log, text
    assert len(re.findall(r'\[[0-9: -]+ TP[01]\] Ignore import error when loading', log)) == 4  # 2 a rank
    # the prefill bar comes before the decode one, both on TP0 only
    assert log.index('Capturing prefill shape') < log.index('Capturing batches (bs=256')

    assert server.request('GET', '/get_load', key='K')[0] == 404  # gone in 0.5.23
    assert server.request('GET', '/v1/loads')[0] == 401
    status, body = server.request('GET', '/v1/loads', key='K')
    loads = json.loads(body)
    assert status == 200 and list(loads) == ['timestamp', 'version', 'accelerator', 'num_accelerators', 'loads']
    assert (loads['version'], loads['num_accelerators']) == ('0.5.23', 2)
    assert list(loads['loads'][0])[:4] == ['timestamp', 'dp_rank', 'num_running_reqs', 'num_waiting_reqs']
    assert set(loads['loads'][0]) >= {'memory', 'disaggregation', 'queues'}
    core = json.loads(server.request('GET', '/v1/loads?include=core', key='K')[1])['loads'][0]
    assert 'memory' not in core and core['decode_moments'] is None

    # a drain with nothing in flight, then ShutdownReq to the ranks, uvicorn stopped, exit 0
    pid = server.proc.pid
    status, took = server.terminate(timeout=5)
    assert status == 0 and took < 3
    log = server.log()
    assert 'Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].' in log
    called = 'kill_process_tree called: parent_pid=%d, include_parent=False, pid=%d' % (pid, pid)
    assert log.count(called) == 2  # the watchdog's, then launch_server.py's finally
    tail = log[log.index('Gracefully exiting'):]
    assert tail.index('INFO:     Shutting down') < tail.index('Application shutdown complete.')
    assert 'INFO:     Finished server process [%d]' % pid in tail
    server.assert_gone()


@pytest.mark.parametrize('fault, needles', [
    ('rank_killed', ['Traceback (most recent call last):', 'EOFError',
                     'During handling of the above exception, another exception occurred:',
                     'RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 '
                     '(SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.']),
    ('graph_oom', ['Exception: Capture cuda graph failed: CUDA out of memory.',
                   '2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)',
                   '3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. (Not recommended. Huge '
                   'performance loss)', 'Received sigquit from a child process. It usually means the child failed.']),
    ('kv_oom', ['RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. '
                'Current value: mem_fraction_static=0.88', 'Received sigquit from a child process.']),
])
def test_0_5_23_failure_texts(standin, fault, needles):
    server = standin(['--tp', '2'], env=dict(NEW, SGLANG_STANDIN_FAULT=fault))
    status = server.wait_exit()
    log = server.log()
    for needle in needles:
        assert needle in log, needle
    assert 'scheduler is dead' not in log and '--cuda-graph-max-bs to' not in log
    if fault == 'rank_killed':
        assert status == 1
        # launch_server.py's finally runs (and logs) before the interpreter prints the traceback
        assert log.index('kill_process_tree called:') < log.index('RuntimeError: Rank 0 scheduler died')
    else:
        assert status == -9
    if fault == 'graph_oom':
        # the capture failed in the decode graphs, after the prefill ones
        assert 'Capture target prefill CUDA graph end.' in log
    server.assert_gone()


def test_0_5_23_notices_a_killed_rank_within_a_second(standin):
    server = standin(['--tp', '2'], env=NEW)
    server.wait_for(READY)
    rank = server.rank_pids()[1]
    os.kill(rank, signal.SIGKILL)
    tic = time.monotonic()
    assert server.wait_exit(5) == -9
    assert time.monotonic() - tic < 3
    log = server.log()
    assert 'Subprocess scheduler_1 (pid=%d) crashed with exit code -9. Triggering SIGQUIT for cleanup...' % rank in log
    assert 'SIGQUIT received. signum=None, frame=None. It usually means one child failed.' in log
    server.assert_gone()
