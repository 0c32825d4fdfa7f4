# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SIGTERM ends the stand-in as it ends the real server, phase by phase (sglang/standin/shutdown.py)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

from sglang.standin.settings import Settings

READY = 'The server is fired up and ready to roll!'
RUNNING = 'Uvicorn running on http://127.0.0.1:'
SLOW_TOKENS = {'SGLANG_STANDIN_TOKEN_SECONDS': '0.01'}


def test_stop_settings():
    assert Settings({}).real_sigterm is True  # the real stop is the default now
    assert Settings({'SGLANG_STANDIN_REAL_SIGTERM': '0'}).real_sigterm is False
    assert Settings({}).drain_poll_seconds == 5.0  # sigterm_watchdog's asyncio.sleep(5)
    assert Settings({'SGLANG_STANDIN_DRAIN_POLL_SECONDS': '0.5'}).drain_poll_seconds == 0.5


def test_sigterm_while_loading_is_the_default_action(standin):
    server = standin(['--tp', '2'], env={'SGLANG_STANDIN_LOAD_SECONDS': '2'})
    server.wait_for('Load weight begin')
    status, took = server.terminate()
    assert status == -signal.SIGTERM and took < 1
    assert 'SIGTERM received' not in server.log() and 'Shutting down' not in server.log()
    server.assert_gone()  # the ranks die with it (PR_SET_PDEATHSIG)


def test_sigterm_before_the_first_request_is_uvicorns(standin):
    # --skip-server-warmup: the port is open and nothing was asked yet. uvicorn shuts down, then
    # re-raises the signal with the default handler: launch_server.py's finally never runs.
    server = standin(['--tp', '2', '--skip-server-warmup'])
    server.wait_for(RUNNING)
    status, took = server.terminate()
    assert status == -signal.SIGTERM and took < 1
    log = server.log()
    tail = log[log.index(RUNNING):]
    for text in ('INFO:     Shutting down', 'INFO:     Waiting for application shutdown.',
                 'INFO:     Application shutdown complete.', 'INFO:     Finished server process [%d]' % server.proc.pid):
        assert text in tail
    assert 'SIGTERM received.' not in log
    server.assert_gone()


def test_sigterm_during_the_warmup_wait_lets_the_warmup_fail(standin):
    # The lifespan's shutdown joins the warmup thread, which polls /model_info on a closed port until
    # it gives up, logs `Initialization failed. warmup error:` and SIGKILLs the tree.
    server = standin(['--tp', '2'], env={'SGLANG_STANDIN_WARMUP_SECONDS': '1'})
    server.wait_for(RUNNING)
    status, took = server.terminate(timeout=4)
    assert status == -9
    log = server.log()
    assert 'INFO:     Shutting down' in log and 'Initialization failed. warmup error:' in log
    assert 'Application shutdown complete.' not in log and READY not in log
    server.assert_gone()


def _generate(server, results, tokens=100):
    def run():
        try:
            status, body = server.request('POST', '/generate', {'text': 'Hi', 'sampling_params': {'max_new_tokens': tokens}},
                                          timeout=30)
            results.append((status, json.loads(body)['meta_info']['id'] if status == 200 else body))
        except OSError as exc:
            results.append(('error', exc))
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_drain_waits_for_requests_in_flight_then_sigkills_itself(standin):
    server = standin(['--tp', '2'], env=SLOW_TOKENS)
    server.wait_for(READY)
    results = []
    thread = _generate(server, results)  # about a second
    time.sleep(0.2)
    tic = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    server.wait_for('Draining requests and shutting down...')
    assert server.request('GET', '/health')[0] == 503
    assert 'Health check request received during shutdown. Returning 503.' in server.log()
    thread.join(10)
    assert results and results[0][0] == 200  # the request in flight completes
    assert server.wait_exit(3) == -9
    assert time.monotonic() - tic > 0.6
    log = server.log()
    # the drain names the request it waits for (its rid is the response's meta_info.id)
    assert ("Gracefully exiting... Remaining number of requests 1. Remaining requests remaining_rids=['%s']."
            % results[0][1]) in log
    assert 'Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].' in log
    server.assert_gone()


def test_sigterm_to_the_whole_group_kills_the_ranks_at_once(standin):
    # systemd's KillMode=control-group: the ranks have no handler and die; the request they served fails.
    for version, ending in (('0.5.9', 'waits'), ('0.5.23', 'watchdog')):
        server = standin(['--tp', '2'], env=dict(SLOW_TOKENS, SGLANG_STANDIN_VERSION=version))
        server.wait_for(READY)
        results = []
        thread = _generate(server, results, tokens=300)
        time.sleep(0.3)
        ranks = server.rank_pids()
        for pid in [server.proc.pid] + ranks:
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 2
        while any(os.path.exists('/proc/%d' % pid) and open('/proc/%d/stat' % pid).read().split(') ')[1][0] != 'Z'
                  for pid in ranks) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert time.monotonic() < deadline  # gone at once, no drain of their own
        if ending == 'waits':
            # 0.5.9 notices nothing: the drain waits for the request forever (until systemd's SIGKILL)
            time.sleep(0.8)
            assert server.proc.poll() is None and not results
            assert server.log().count('Remaining number of requests 1.') >= 2
            server.kill_all()
        else:
            # 0.5.23's SubprocessWatchdog sees a rank exit -15 and SIGQUITs the tree
            assert server.wait_exit(4) == -9
            assert 'crashed with exit code -15. Triggering SIGQUIT for cleanup...' in server.log()
        thread.join(10)
        assert results and results[0][0] != 200
        server.assert_gone()
