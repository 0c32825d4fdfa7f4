# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stand-in's request gauges and its hang after ready (hang_after_ready.py): what a liveness
check of a serving node sees."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time

from sglang.standin import metrics

READY = 'The server is fired up and ready to roll!'
HANG = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                    'tests', 'fixtures', 'sglang_standin', 'hang_after_ready.py')


def gauges(server):
    status, body = server.request('GET', '/metrics')
    assert status == 200
    found = dict(re.findall(r'^sglang:(num_running_reqs|num_queue_reqs)\{[^}]*\} (\S+)$', body, re.M))
    return int(float(found['num_running_reqs'])), int(float(found['num_queue_reqs']))


def hang(port, action=None):
    argv = [sys.executable, HANG, str(port)] + ([action] if action else [])
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def test_gauges_count_requests_in_and_out_thread_safely():
    gauge = metrics.Metrics('m')
    gauge.enqueue()
    gauge.enqueue()
    gauge.admit()
    assert gauge.live() == (1, 1)
    # the prefill sample counts the requests that were already running: none
    assert 'sglang:num_running_reqs{model_name="m"} 0.0' in gauge.render()
    assert 'sglang:num_queue_reqs{model_name="m"} 1.0' in gauge.render()
    gauge.decode_sample()
    assert 'sglang:num_running_reqs{model_name="m"} 1.0' in gauge.render()
    gauge.finish(admitted=True)
    gauge.finish(admitted=False)  # left the queue on a timeout
    assert gauge.live() == (0, 0)
    assert gauge.gauges() == (1, 1)  # 0.5.9: stale until the idle refresh


def test_metrics_show_running_and_queued_generation_requests(standin):
    # the idle refresh after 0.8 s instead of 30 s, so the end of the test sees it
    server = standin(['--tp', '2', '--enable-metrics'], env={'SGLANG_STANDIN_TOKEN_SECONDS': '0.005',
                                                             'SGLANG_STANDIN_METRICS_IDLE_SECONDS': '0.8'})
    server.wait_for(READY)
    assert gauges(server) == (0, 0)
    results = []

    def long_generate():
        results.append(server.request('POST', '/generate', {'text': 'Hi', 'sampling_params': {'max_new_tokens': 200}},
                                      timeout=30)[0])

    threads = [threading.Thread(target=long_generate) for dummy in range(3)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 2
    seen = (0, 0)
    while time.monotonic() < deadline and sum(seen) < 3:
        seen = gauges(server)
        time.sleep(0.02)
    # the ranks take one request at a time: one runs, the others wait for it (sampled every 40th decode step)
    assert seen == (1, 2)
    for thread in threads:
        thread.join(30)
    assert results == [200, 200, 200]
    assert gauges(server) == (1, 0)  # the last decode sample, until the scheduler idles for a while
    time.sleep(0.9)
    assert gauges(server) == (0, 0)
    server.terminate()
    server.assert_gone()


def test_hang_after_ready_freezes_generation_but_not_http(standin):
    server = standin(['--tp', '2'], env={'SGLANG_HEALTH_CHECK_TIMEOUT': '2'})
    server.wait_for(READY)
    assert server.request('GET', '/health_generate')[0] == 200

    done = hang(server.port, 'stop')
    assert done.returncode == 0, done.stderr
    ranks = [pid for pid in server.pids() if pid != server.proc.pid]
    assert 'froze (SIGSTOP) sglang::schedul of the server on port %d (pid %d): %s' % (
        server.port, server.proc.pid, ' '.join(map(str, sorted(ranks)))) in done.stdout
    # SIGSTOP is delivered asynchronously: on a busy machine a rank may still read R for a moment.
    for pid in ranks:
        state, deadline = None, time.monotonic() + 5
        while state != 'T' and time.monotonic() < deadline:
            with open('/proc/%d/stat' % pid) as handle:
                state = handle.read().rsplit(')', 1)[1].split()[0]
            if state != 'T':
                time.sleep(0.05)
        assert state == 'T', (pid, state)  # stopped

    tic = time.monotonic()
    assert server.request('GET', '/health_generate')[0] == 503
    assert 1.8 < time.monotonic() - tic < 4  # after SGLANG_HEALTH_CHECK_TIMEOUT, not at once, not never
    assert "Server couldn't get a response from detokenizer for last 2 seconds." in server.log()
    assert server.request('GET', '/health')[0] == 503
    assert server.request('GET', '/ping')[0] == 200
    assert server.request('GET', '/model_info')[0] == 200
    # a generation waits like the real one ...
    answered = []
    waiter = threading.Thread(target=lambda: answered.append(server.request(
        'POST', '/generate', {'text': 'Hi', 'sampling_params': {'max_new_tokens': 4}}, timeout=30)[0]))
    waiter.start()
    waiter.join(1.5)
    assert waiter.is_alive() and not answered

    done = hang(server.port, 'cont')
    assert done.returncode == 0 and 'resumed (SIGCONT)' in done.stdout, done.stderr
    waiter.join(10)
    assert answered == [200]  # ... and is answered once the scheduler runs again
    assert server.request('GET', '/health_generate')[0] == 200
    assert server.terminate()[0] == -9
    server.assert_gone()


def test_hang_after_ready_without_a_server_or_arguments():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]  # bound, not listening: nothing to find
        done = hang(port)
    assert done.returncode == 1 and 'nothing listens on port %d' % port in done.stderr
    for argv in ([], ['x'], ['30000', 'freeze'], ['1', 'stop', 'more']):
        done = subprocess.run([sys.executable, HANG] + argv, capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 2 and 'usage: hang_after_ready.py PORT [stop|cont]' in done.stderr


def test_hang_after_ready_refuses_a_listener_without_schedulers():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        sock.listen(1)
        done = hang(sock.getsockname()[1])
    assert done.returncode == 1 and 'has no sglang::schedul process' in done.stderr
