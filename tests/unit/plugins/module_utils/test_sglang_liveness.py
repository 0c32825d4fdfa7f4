# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Liveness after ready: the state machine with fakes, then the script for real against the SGLang
stand-in frozen after it was ready, with a fake systemctl on PATH."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.sglang import liveness
from ports import free_port  # tests/unit/ports.py

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SCRIPT = os.path.join(REPO_ROOT, 'plugins', 'module_utils', 'sglang', 'liveness.py')
STANDIN = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'sglang_standin')
HANG = os.path.join(STANDIN, 'hang_after_ready.py')
UNIT = 'sglang-server.service'
RESTART = 'sglang liveness: restarting sglang-server.service after 3 failed /health_generate probes in a row (last: %s)'


class Fakes:
    """The unit, the server and the clock, as a test sets them."""

    def __init__(self):
        self.props = {'ActiveState': 'active', 'InvocationID': 'inv-1', 'ActiveEnterTimestampMonotonic': '100000000'}
        self.now = 1000.0
        self.answers = []
        self.probes = 0
        self.restarts = []
        self.lines = []
        self.state = {}

    def probe(self, url, timeout):
        assert (url, timeout) == ('http://127.0.0.1:30000/health_generate', 5)
        self.probes += 1
        return self.answers.pop(0)

    def save(self, state):
        self.state = json.loads(json.dumps(state))  # what the file would hold

    def check(self, failures=3, grace=0.0, gate_passed=''):
        return liveness.Liveness(
            UNIT, 'http://127.0.0.1:30000/health_generate', failures, 5, show=lambda unit: dict(self.props),
            probe=self.probe, restart=self.restarts.append, load=lambda: dict(self.state), save=self.save,
            log=self.lines.append, clock=lambda: self.now, grace=grace, gate_passed=lambda: gate_passed)

    def run(self, *answers, **kwargs):
        self.answers.extend(answers)
        return self.check(**kwargs).run()


OK, BAD, SLOW = (True, 'status 200'), (False, 'status 503'), (False, 'timeout after 5 s')


def test_failures_count_only_after_ready_and_restart_at_n():
    fakes = Fakes()
    assert fakes.run(BAD) == 'not_ready'  # still loading: no count
    assert fakes.run(BAD) == 'not_ready'
    assert fakes.state == {'invocation': 'inv-1', 'ready_seen': False, 'failures': 0}
    assert fakes.run(OK) == 'ready'
    assert fakes.lines == ['sglang liveness: sglang-server.service answered 200 (invocation inv-1): armed, it is'
                           ' restarted after 3 failed /health_generate probes in a row']
    assert fakes.run(BAD) == 'failed'
    assert fakes.run(SLOW) == 'failed'
    assert fakes.state['failures'] == 2 and not fakes.restarts
    assert fakes.run(BAD) == 'restarted'
    assert fakes.restarts == [UNIT]
    assert fakes.lines[1:] == ['sglang liveness: probe 1/3 failed: status 503',
                               'sglang liveness: probe 2/3 failed: timeout after 5 s',
                               'sglang liveness: probe 3/3 failed: status 503',
                               RESTART % 'status 503']
    assert fakes.state['failures'] == 0 and fakes.state['ready_seen'] is True
    # the restart is asked for once; the count fills up again before the next one
    assert fakes.run(BAD) == 'failed' and fakes.restarts == [UNIT]


def test_the_gates_pass_arms_the_count_before_the_first_probe():
    # A hang right after the gate passed: no probe of this script ever saw 200, and the count runs all the same.
    fakes = Fakes()
    assert fakes.run(BAD, gate_passed='inv-1') == 'failed'
    assert fakes.lines == ['sglang liveness: sglang-server.service passed its health gate (invocation inv-1): armed, it'
                           ' is restarted after 3 failed /health_generate probes in a row',
                           'sglang liveness: probe 1/3 failed: status 503']
    assert [fakes.run(SLOW, gate_passed='inv-1'), fakes.run(BAD, gate_passed='inv-1')] == ['failed', 'restarted']
    assert fakes.restarts == [UNIT]
    # The record of another run (the one before a restart by systemd) arms nothing.
    other = Fakes()
    assert [other.run(BAD, gate_passed='inv-0') for dummy in range(4)] == ['not_ready'] * 4 and not other.restarts
    # During the grace it is armed already, and says so once.
    graced = Fakes()
    graced.now = 100.5
    assert graced.run(gate_passed='inv-1', grace=5) == 'armed' and graced.state['ready_seen'] is True
    assert graced.run(gate_passed='inv-1', grace=5) == 'starting' and len(graced.lines) == 1


def test_the_ready_record_is_read_as_the_module_writes_it(tmp_path):
    path = tmp_path / 'ready.json'
    assert liveness.read_ready(str(path)) == '' and liveness.read_ready('') == ''
    path.write_text(json.dumps({'identity': 'inv-9', 'pid': 12, 'revision': 'r'}))
    assert liveness.read_ready(str(path)) == 'inv-9'
    path.write_text('{half')
    assert liveness.read_ready(str(path)) == ''


def test_a_200_resets_the_count():
    fakes = Fakes()
    fakes.run(OK)
    fakes.run(BAD)
    fakes.run(BAD)
    assert fakes.run(OK) == 'ok'
    assert fakes.lines[-1] == 'sglang liveness: probe answered 200 after 2 failure(s): count reset'
    assert fakes.state['failures'] == 0
    assert [fakes.run(BAD), fakes.run(BAD)] == ['failed', 'failed'] and not fakes.restarts
    assert fakes.run(BAD) == 'restarted'


@pytest.mark.parametrize('active_state', ['inactive', 'activating', 'deactivating', 'failed', 'reloading', None])
def test_a_unit_that_is_not_active_is_not_probed_and_resets_the_count(active_state):
    fakes = Fakes()
    fakes.run(OK)
    fakes.run(BAD)
    fakes.props['ActiveState'] = active_state
    assert fakes.run() == 'inactive'
    assert fakes.probes == 2 and fakes.state == {}
    fakes.props['ActiveState'] = 'active'
    assert fakes.run(BAD) == 'not_ready'  # the same invocation: ready must be seen again


def test_a_new_invocation_starts_from_nothing():
    fakes = Fakes()
    fakes.run(OK)
    fakes.run(BAD)
    fakes.run(BAD)
    fakes.props['InvocationID'] = 'inv-2'  # restarted by someone else between two runs
    assert fakes.run(BAD) == 'not_ready'
    assert fakes.state == {'invocation': 'inv-2', 'ready_seen': False, 'failures': 0}
    assert fakes.run(OK) == 'ready'


def test_without_an_invocation_id_the_activation_time_keys_the_state():
    fakes = Fakes()
    fakes.props['InvocationID'] = ''
    fakes.run(OK)
    assert fakes.state['invocation'] == 'active-since:100000000'
    fakes.props['ActiveEnterTimestampMonotonic'] = '200000000'
    assert fakes.run(BAD) == 'not_ready'


def test_grace_after_the_unit_became_active():
    fakes = Fakes()
    fakes.props['ActiveEnterTimestampMonotonic'] = str(int(995 * 1e6))  # active for 5 s
    assert fakes.run(grace=10) == 'starting' and fakes.probes == 0
    fakes.now = 1006.0
    assert fakes.run(OK, grace=10) == 'ready'
    fakes.props['ActiveEnterTimestampMonotonic'] = '0'  # not known: not active long enough
    assert fakes.run() == 'starting'


def test_state_file_round_trip_is_atomic_and_tolerant(tmp_path):
    path = liveness.state_path(str(tmp_path / 'run' / 'inferops'), UNIT)
    assert path.endswith('/sglang-liveness-sglang-server.service.json')
    assert liveness.load_state(path) == {}
    liveness.save_state(path, {'failures': 2})
    assert liveness.load_state(path) == {'failures': 2}
    assert oct(os.stat(path).st_mode & 0o777) == '0o644'
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]
    with open(path, 'w') as handle:
        handle.write('{half')
    assert liveness.load_state(path) == {}
    with open(path, 'w') as handle:
        handle.write('[1]')
    assert liveness.load_state(path) == {}


def test_systemctl_calls_and_their_failures():
    calls = []

    def run(argv, timeout):
        calls.append((argv, timeout))
        return 'ActiveState=active\nInvocationID=abc\nActiveEnterTimestampMonotonic=5\nnoise\n'

    assert liveness.systemctl_show(UNIT, 7, run) == {'ActiveState': 'active', 'InvocationID': 'abc',
                                                     'ActiveEnterTimestampMonotonic': '5'}
    liveness.systemctl_restart(UNIT, 7, run)
    assert calls == [(['systemctl', 'show', '-p', 'ActiveState', '-p', 'SubState', '-p', 'InvocationID', '-p',
                       'ActiveEnterTimestampMonotonic', '--', UNIT], 7),
                     (['systemctl', 'restart', '--no-block', '--', UNIT], 7)]
    with pytest.raises(liveness.CommandFailed, match='exit 3: boom'):
        liveness.run_command([sys.executable, '-c', 'import sys; sys.stderr.write("boom"); sys.exit(3)'], 10)
    with pytest.raises(liveness.CommandFailed, match='no answer in 0.2 s'):
        liveness.run_command([sys.executable, '-c', 'import time; time.sleep(5)'], 0.2)
    with pytest.raises(liveness.CommandFailed, match='No such file'):
        liveness.run_command(['/nonexistent/systemctl'], 1)


def test_http_probe_names_the_cause():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
        assert liveness.http_probe('http://127.0.0.1:%d/health_generate' % port, 1) == (False, 'connection refused')
        sock.listen(1)  # accepts, never answers
        tic = time.monotonic()
        assert liveness.http_probe('http://127.0.0.1:%d/health_generate' % port, 0.3) == (False, 'timeout after 0.3 s')
        assert time.monotonic() - tic < 2


def answering(reply):
    """A one-shot server on a free port that sends `reply` (bytes) to the first request."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    sock.listen(1)

    def serve():
        conn, dummy = sock.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(reply)
        sock.close()

    threading.Thread(target=serve, daemon=True).start()
    return 'http://127.0.0.1:%d/health_generate' % sock.getsockname()[1]


def test_http_probe_reads_the_status_and_names_a_broken_answer():
    ok = b'HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'
    assert liveness.http_probe(answering(ok), 2) == (True, 'status 200')
    busy = b'HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'
    assert liveness.http_probe(answering(busy), 2) == (False, 'status 503')
    # A wedged engine's half answer: not HTTP, or the connection closed before a status line.
    ok_flag, cause = liveness.http_probe(answering(b'garbage\r\n\r\n'), 2)
    assert not ok_flag and cause.startswith('error: '), cause
    ok_flag, cause = liveness.http_probe(answering(b''), 2)
    assert not ok_flag and cause.startswith('error: '), cause
    assert liveness.http_probe('https://127.0.0.1:1/health_generate', 1) == (
        False, 'error: not an http:// URL: https://127.0.0.1:1/health_generate')


def test_http_probe_ignores_a_proxy_from_the_environment(monkeypatch):
    # A proxy that would answer 200 for anything must not stand in for the local server.
    proxy = answering(b'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n').rsplit('/', 1)[0]
    monkeypatch.setenv('http_proxy', proxy)
    monkeypatch.setenv('no_proxy', '')
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
        assert liveness.http_probe('http://127.0.0.1:%d/health_generate' % port, 1) == (False, 'connection refused')


def test_bad_arguments_exit_2(capsys):
    for argv in ([], ['--unit', UNIT], ['--unit', UNIT, '--url', 'http://x/', '--failures', '0']):
        with pytest.raises(SystemExit) as exc:
            liveness.main(argv)
        assert exc.value.code == 2
    capsys.readouterr()


# -- the script for real: the stand-in frozen after ready, a fake systemctl -------------------------

FAKE_SYSTEMCTL = '''#!/bin/sh
# Records its argv; `show` describes an active unit that became active long ago.
echo "$*" >> "$FAKE_SYSTEMCTL_LOG"
case "$1" in
  show) printf 'ActiveState=active\\nSubState=running\\nInvocationID=test-invocation\\nActiveEnterTimestampMonotonic=1000000\\n' ;;
esac
'''


@pytest.fixture
def frozen_standin(tmp_path):
    """A ready stand-in (CPU mode, 2 ranks, 1 s health timeout) in its own session: (port, log path)."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=STANDIN, SGLANG_STANDIN_GPU='0', SGLANG_STANDIN_LOAD_SECONDS='0.3',
               SGLANG_STANDIN_DRAIN_POLL_SECONDS='0.2',
               SGLANG_STANDIN_WARMUP_SECONDS='0.1', SGLANG_STANDIN_TOKEN_SECONDS='0', SGLANG_HEALTH_CHECK_TIMEOUT='1',
               SGLANG_STANDIN_FAULT='', SGLANG_STANDIN_FAULT_FILE=str(tmp_path / 'no-fault'))
    (tmp_path / 'model').mkdir()
    log_path = tmp_path / 'server.log'
    with open(str(log_path), 'wb') as log:
        proc = subprocess.Popen([sys.executable, '-m', 'sglang.launch_server', '--model-path', str(tmp_path / 'model'),
                                 '--port', str(port), '--tp', '2'], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, cwd=str(tmp_path), start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while 'The server is fired up and ready to roll!' not in log_path.read_text(errors='replace'):
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text(errors='replace')
            time.sleep(0.05)
        yield port, log_path
    finally:
        subprocess.run([sys.executable, HANG, str(port), 'cont'], capture_output=True, timeout=30, check=False)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait(10)


def test_the_script_restarts_a_server_frozen_right_after_its_gate_passed(frozen_standin, tmp_path):
    port, _log = frozen_standin
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'systemctl').write_text(FAKE_SYSTEMCTL)
    (bin_dir / 'systemctl').chmod(0o755)
    calls = tmp_path / 'systemctl.argv'
    env = dict(os.environ, PATH='%s:%s' % (bin_dir, os.environ.get('PATH', '')), FAKE_SYSTEMCTL_LOG=str(calls))
    state_dir = tmp_path / 'run' / 'inferops'

    # The health gate passed this run of the unit (the module's record) and the engine hangs at once:
    # the script never saw a 200 of its own.
    ready = tmp_path / 'ready.json'
    ready.write_text(json.dumps({'identity': 'test-invocation', 'pid': 1, 'revision': 'r'}))

    def run(timeout='5'):
        done = subprocess.run([sys.executable, SCRIPT, '--unit', UNIT, '--url', 'http://127.0.0.1:%d/health_generate' % port,
                               '--failures', '3', '--timeout', timeout, '--state-dir', str(state_dir), '--command-timeout', '10',
                               '--ready-file', str(ready)],
                              capture_output=True, text=True, timeout=60, env=env, check=False)
        assert done.returncode == 0 and not done.stderr, done
        return done.stdout.splitlines()

    hang = subprocess.run([sys.executable, HANG, str(port), 'stop'], capture_output=True, text=True, timeout=30, check=False)
    assert hang.returncode == 0, hang.stderr
    assert run() == ['sglang liveness: sglang-server.service passed its health gate (invocation test-invocation): armed,'
                     ' it is restarted after 3 failed /health_generate probes in a row',
                     'sglang liveness: probe 1/3 failed: status 503']  # the server's own health timeout (1 s)
    assert run('0.5') == ['sglang liveness: probe 2/3 failed: timeout after 0.5 s']  # ours came first
    assert not any(line.startswith('restart') for line in calls.read_text().splitlines())
    assert run() == ['sglang liveness: probe 3/3 failed: status 503', RESTART % 'status 503']
    argvs = calls.read_text().splitlines()
    assert argvs[-1] == 'restart --no-block -- %s' % UNIT
    assert sum(line.startswith('restart') for line in argvs) == 1
    assert all(line.startswith('show -p ActiveState') for line in argvs[:-1])
    state = json.loads((state_dir / ('sglang-liveness-%s.json' % UNIT)).read_text())
    assert state == {'invocation': 'test-invocation', 'ready_seen': True, 'failures': 0, 'last_cause': 'status 503'}


def test_for_the_journal_failures_are_warnings(tmp_path):
    # The unit runs the script with --journal and LogLevelMax=notice: the lines an operator looks for
    # are warnings, the others notices, so a quiet run writes nothing at all.
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'systemctl').write_text(FAKE_SYSTEMCTL)
    (bin_dir / 'systemctl').chmod(0o755)
    state_dir = tmp_path / 'run'
    state_dir.mkdir()
    (state_dir / ('sglang-liveness-%s.json' % UNIT)).write_text(json.dumps(
        {'invocation': 'test-invocation', 'ready_seen': True, 'failures': 0, 'last_cause': ''}))
    env = dict(os.environ, PATH='%s:%s' % (bin_dir, os.environ.get('PATH', '')), FAKE_SYSTEMCTL_LOG=str(tmp_path / 'argv'))
    done = subprocess.run([sys.executable, SCRIPT, '--unit', UNIT, '--url', 'http://127.0.0.1:%d/health_generate' % free_port(),
                           '--failures', '1', '--timeout', '2', '--state-dir', str(state_dir), '--journal'],
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0, done
    assert done.stdout.splitlines() == [
        '<4>sglang liveness: probe 1/1 failed: connection refused',
        '<4>' + (RESTART % 'connection refused').replace('after 3 failed', 'after 1 failed'),
    ]
