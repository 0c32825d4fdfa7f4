# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gate's decisions, driven by a scripted server on a fake clock."""

from __future__ import annotations

import json
import time

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.gate import Gate
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.probe import Probe
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.watch import LogFollower, ProgressFile

GENERATE_OK = json.dumps({'text': ' Paris', 'meta_info': {'completion_tokens': 8}})
MODELS_OK = json.dumps({'data': [{'id': 'm'}]})


class Script:
    """A server whose log, port, process and HTTP answers follow a timeline on a fake clock."""

    def __init__(self, tmp_path, timeline, exit_at=None, port_at=None, health_ok_at=None, generate=GENERATE_OK):
        self.now = 0.0
        self.generate = generate
        self.log = tmp_path / 'server.log'
        self.log.write_text('earlier run\n')
        self.timeline = sorted(timeline)  # [(time, line)]
        self.exit_at = exit_at
        self.port_at = port_at
        self.health_ok_at = health_ok_at

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        time.sleep(0.001)  # let the probe thread run
        while self.timeline and self.timeline[0][0] <= self.now:
            with open(str(self.log), 'a') as handle:
                handle.write(self.timeline.pop(0)[1] + '\n')

    def status(self):
        if self.exit_at is not None and self.now >= self.exit_at:
            return False, 'exited with status 1'
        return True, None

    def port_open(self, host, port):
        return self.port_at is not None and self.now >= self.port_at

    def http(self, method, url, headers, body, timeout):
        if not self.port_open(None, None):
            return None, '', 'Connection refused'
        path = url.split(':30000', 1)[1]
        self.asked = getattr(self, 'asked', []) + [path]
        if path in ('/health_generate', '/health'):
            return (200 if self.health_ok_at is not None and self.now >= self.health_ok_at else 503), '', None
        return 200, {'/generate': self.generate, '/v1/models': MODELS_OK, '/model_info': '{}'}[path], None

    def gate(self, timeout=60, stall_timeout=10, **kwargs):
        return Gate(self, LogFollower(str(self.log)), Probe(self.http, '127.0.0.1', 30000),
                    ProgressFile(str(self.log) + '.progress', clock=self.clock), '127.0.0.1', 30000,
                    timeout=timeout, stall_timeout=stall_timeout, poll_interval=0.2, clock=self.clock,
                    sleep=self.sleep, is_port_open=self.port_open, **kwargs)


HEALTHY = [(0.1, "server_args=ServerArgs(model_path='/m')"), (0.5, 'Load weight begin. avail mem=90 GB'),
           (3.0, 'INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)'),
           (5.0, 'The server is fired up and ready to roll!')]


def test_a_healthy_start_is_ready_right_after_the_ready_line(tmp_path):
    script = Script(tmp_path, HEALTHY, port_at=3.0, health_ok_at=5.0)
    result = script.gate().run()
    assert result['ready'] and result['phase'] == 'ready'
    assert result['port_open_seconds'] == 3.0
    assert 5.0 <= result['startup_seconds'] <= 5.5
    assert result['sample']['completion_tokens'] == 8
    assert 'earlier run' not in result['log_tail']


def test_an_open_port_and_answering_models_during_warmup_are_not_ready(tmp_path):
    # Port open, /v1/models 200, /health_generate 503 forever: a TCP or /v1/models probe would pass here.
    script = Script(tmp_path, HEALTHY[:3], port_at=3.0, health_ok_at=None)
    result = script.gate(timeout=20).run()
    assert not result['ready'] and result['cause'] == 'timeout'
    assert '503' in result['msg'] and 'phase warmup' in result['msg']


def test_a_generation_with_no_token_fails_at_once_not_at_the_deadline(tmp_path):
    empty = json.dumps({'text': '', 'meta_info': {'completion_tokens': 0}})
    script = Script(tmp_path, HEALTHY, port_at=3.0, health_ok_at=5.0, generate=empty)
    result = script.gate(timeout=3000).run()
    assert not result['ready'] and result['cause'] == 'no_tokens' and result['startup_seconds'] < 6
    assert 'no completion token' in result['msg'] and 'generates nothing' in result['fix']


def test_a_running_server_whose_log_cannot_tell_is_judged_by_http(tmp_path):
    # Attached to a server whose start lines were rotated out of the log: the ready line counts as seen.
    script = Script(tmp_path, [(0.5, 'Decode batch. #running-req: 1')], port_at=0.0, health_ok_at=0.0)
    result = script.gate(timeout=10, ready_line_seen=True).run()
    assert result['ready'] and result['startup_seconds'] < 1


def test_the_failure_shows_the_servers_lines_and_a_clipped_log_line(tmp_path):
    args = "server_args=ServerArgs(model_path='/m', %s)" % ', '.join('option_%d=%d' % (n, n) for n in range(400))
    access = 'INFO:     127.0.0.1:5%d - "GET /health_generate HTTP/1.1" 503 Service Unavailable'
    timeline = [(0.1, args)] + [(0.2 + n / 10.0, access % n) for n in range(5)]
    timeline.append((1.0, 'RuntimeError: CUDA error: an illegal memory access was encountered'))
    timeline.append((1.1, 'Scheduler hit an exception: ' + 'x' * 2000))
    script = Script(tmp_path, timeline, exit_at=1.5, port_at=0.2)
    result = script.gate().run()
    assert not result['ready'] and result['cause'] == 'rank_crash'
    assert not any('/health_generate' in line for line in result['log_tail'])
    assert result['log_tail'][-1].startswith('Scheduler hit an exception')
    assert len(result['msg']) < 1000 and 'x' * 250 + ' [cut]' in result['msg'] and 'x' * 300 not in result['msg']


def test_health_200_without_the_ready_line_is_not_ready(tmp_path):
    script = Script(tmp_path, HEALTHY[:3], port_at=3.0, health_ok_at=3.0)
    result = script.gate(timeout=10).run()
    assert not result['ready'] and 'ready to roll' in result['msg']


def test_an_exit_fails_at_once_with_the_cause_from_the_log(tmp_path):
    lines = [(0.1, "server_args=ServerArgs(model_path='/m')"),
             (0.4, 'CRITICAL WARNING: PyTorch 2.9.1 & CuDNN Compatibility Issue Detected'),
             (0.5, 'Or you can disable this check by setting env var SGLANG_DISABLE_CUDNN_CHECK=1')]
    script = Script(tmp_path, lines, exit_at=0.5)
    result = script.gate().run()
    assert result['cause'] == 'cudnn_guard' and 'SGLANG_DISABLE_CUDNN_CHECK=1' in result['fix']
    assert result['startup_seconds'] <= 0.8
    assert 'exited with status 1' in result['msg']


def test_an_exit_with_an_unknown_message_fails_at_once_with_the_tail(tmp_path):
    script = Script(tmp_path, [(0.1, 'server_args=ServerArgs()'), (2.9, 'something nobody knows')], exit_at=3.0)
    result = script.gate(timeout=600, stall_timeout=600).run()
    assert result['cause'] == 'unknown' and result['startup_seconds'] <= 3.3
    assert result['log_tail'][-1] == 'something nobody knows'


def test_a_fatal_line_fails_while_the_process_still_lives(tmp_path):
    lines = [(0.1, 'server_args=ServerArgs()'),
             (1.0, '[TP2] Scheduler hit an exception: Traceback (most recent call last):'),
             (1.1, 'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.')]
    script = Script(tmp_path, lines)
    result = script.gate().run()
    assert result['cause'] == 'kv_pool_oom' and 'still running' in result['msg']
    assert 1.5 <= result['startup_seconds'] <= 2.0


def test_a_silent_hang_before_the_port_opens_is_a_stall(tmp_path):
    script = Script(tmp_path, [(0.1, 'server_args=ServerArgs()'), (1.0, 'Init torch distributed begin.')])
    result = script.gate(stall_timeout=5).run()
    assert result['cause'] == 'stalled' and 'NCCL_P2P_DISABLE=1' in result['fix']
    assert 6.0 <= result['startup_seconds'] <= 6.5


def test_a_quiet_log_after_the_port_opened_is_not_a_stall(tmp_path):
    script = Script(tmp_path, HEALTHY[:3] + [(40.0, 'The server is fired up and ready to roll!')],
                    port_at=3.0, health_ok_at=40.0)
    result = script.gate(stall_timeout=5).run()
    assert result['ready']


def test_the_deadline_ends_a_start_that_keeps_logging(tmp_path):
    lines = [(t / 2.0, 'Loading safetensors checkpoint shards: %d%%' % t) for t in range(1, 100)]
    script = Script(tmp_path, lines)
    result = script.gate(timeout=30, stall_timeout=5).run()
    assert result['cause'] == 'timeout' and 30 <= result['startup_seconds'] <= 30.3
    assert result['phase'] == 'loading'


# A follower of a multi-node launch as real SGLang runs it (entrypoints/engine.py, utils/common.py):
# ranks load, then the dummy health server starts; no warmup, never the ready line.
FOLLOWER = [(0.1, "[2026-12-04 10:00:00 TP8] Init torch distributed begin."),
            (0.5, '[2026-12-04 10:00:01 TP8] Load weight begin. avail mem=90 GB'),
            (3.0, '[2026-12-04 10:00:04] Dummy health check server started in background thread at 0.0.0.0:30000')]


def test_a_follower_is_ready_when_its_health_server_answers_without_a_ready_line(tmp_path):
    script = Script(tmp_path, FOLLOWER, port_at=3.0, health_ok_at=3.0)
    result = script.gate(do_probe=False).run()
    assert result['ready'] and result['sample'] is None and 3.0 <= result['startup_seconds'] < 3.5
    # No generate, no model name: a follower serves no HTTP but its dummy health server.
    assert set(script.asked) == {'/health'}


def test_a_follower_is_not_ready_on_a_200_without_its_dummy_server_line(tmp_path):
    # Another process answers on the port: the follower's own line never comes.
    script = Script(tmp_path, FOLLOWER[:2], port_at=0.2, health_ok_at=0.2)
    result = script.gate(do_probe=False, timeout=5, stall_timeout=100).run()
    assert not result['ready'] and result['cause'] == 'timeout'
    assert "/health is 200 but the log has no 'Dummy health check server started in background thread at' line yet" in result['msg']
    # Where the log level hides INFO lines (follower_line_seen), the 200 decides.
    (tmp_path / 'quiet').mkdir()
    script = Script(tmp_path / 'quiet', FOLLOWER[:2], port_at=0.2, health_ok_at=0.2)
    assert script.gate(do_probe=False, follower_line_seen=True).run()['ready']


def test_a_follower_whose_health_server_never_answers_times_out(tmp_path):
    script = Script(tmp_path, FOLLOWER[:2], port_at=None, health_ok_at=None)
    result = script.gate(do_probe=False, timeout=10, stall_timeout=100).run()
    assert not result['ready'] and result['cause'] == 'timeout'


def test_a_follower_that_dies_fails_naming_the_cause(tmp_path):
    timeline = FOLLOWER[:2] + [(1.0, '[2026-12-04 10:00:02 TP9] Scheduler hit an exception: Traceback (most recent call last):'),
                               (1.1, 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB')]
    script = Script(tmp_path, timeline, exit_at=1.5, port_at=None)
    result = script.gate(do_probe=False).run()
    assert not result['ready'] and result['cause'] == 'cuda_oom'


def test_a_capture_bar_that_only_redraws_is_not_a_stall(tmp_path):
    # tqdm on TP0 redraws with \r and no newline until the capture ends: minutes without a line.
    script = Script(tmp_path, HEALTHY[:2], port_at=None)
    meter = 'Capturing batches (bs=%d avail_mem=10.00 GB):  %d%%|'
    redraws = [(1.0 + n, '\r' + meter % (256 - n, n)) for n in range(30)]
    script.timeline = sorted(script.timeline + redraws)

    def sleep(seconds):  # the redraws are written without a newline
        script.now += seconds
        time.sleep(0.001)
        while script.timeline and script.timeline[0][0] <= script.now:
            line = script.timeline.pop(0)[1]
            with open(str(script.log), 'a') as handle:
                handle.write(line if line.startswith('\r') else line + '\n')
    script.sleep = sleep
    result = script.gate(timeout=20, stall_timeout=5).run()
    assert not result['ready'] and result['cause'] == 'timeout', result['msg']


def test_progress_is_written_while_waiting(tmp_path):
    script = Script(tmp_path, HEALTHY, port_at=3.0, health_ok_at=5.0)
    script.gate().run()
    progress = json.load(open(str(script.log) + '.progress'))
    assert progress['state'] == 'ready' and progress['phase'] == 'ready'


def test_a_finished_readiness_round_is_acted_on_at_once_not_at_the_next_poll(tmp_path):
    # Real clock and the gate's own wait: a 5 s poll interval must not delay the verdict.
    log = tmp_path / 'server.log'
    log.write_text('')
    follower = LogFollower(str(log))
    log.write_text('INFO:     Uvicorn running on http://127.0.0.1:30000\nThe server is fired up and ready to roll!\n')

    class Alive:
        @staticmethod
        def status():
            return True, None

    def http(method, url, headers, body, timeout):
        time.sleep(0.05)  # a round that is still running when the first poll ends
        path = url.split(':30000', 1)[1]
        return 200, {'/health_generate': '', '/generate': GENERATE_OK, '/v1/models': MODELS_OK, '/model_info': '{}'}[path], None

    gate = Gate(Alive(), follower, Probe(http, '127.0.0.1', 30000), ProgressFile(str(tmp_path / 'progress.json')),
                '127.0.0.1', 30000, timeout=60, stall_timeout=10, poll_interval=5.0,
                is_port_open=lambda host, port: True)
    began = time.monotonic()
    result = gate.run()
    assert result['ready']
    assert time.monotonic() - began < 2.0
