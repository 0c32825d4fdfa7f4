# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs the SGLang stand-in (tests/fixtures/sglang_standin) as a real process tree and watches it.

Every process of one start carries SGLANG_STANDIN_TEST_TAG in its environment, so "nothing is
left" is checked over all of /proc, reparented orphans included.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from ports import free_port  # tests/unit/ports.py (tests/unit/conftest.py puts it on sys.path)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STANDIN = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'sglang_standin')
if STANDIN not in sys.path:
    sys.path.insert(0, STANDIN)

# Small timings: a clean start is ready in about a second.
FAST = {
    'SGLANG_STANDIN_LOAD_SECONDS': '0.4',
    'SGLANG_STANDIN_LOG_INTERVAL': '0.1',
    'SGLANG_STANDIN_WARMUP_SECONDS': '0.2',
    'SGLANG_STANDIN_WARMUP_POLL_SECONDS': '0.3',
    'SGLANG_STANDIN_FAULT_DELAY': '0.5',
    'SGLANG_STANDIN_TOKEN_SECONDS': '0',
    'SGLANG_STANDIN_GPU': '0',
    'SGLANG_HEALTH_CHECK_TIMEOUT': '3',
    # the SIGTERM watchdog's poll (5 s in sglang): a stop after the first request takes about this long
    'SGLANG_STANDIN_DRAIN_POLL_SECONDS': '0.2',
}


@pytest.fixture
def a_port():
    """A port for a test that names it on the command line itself."""
    return free_port()


def _stat(pid):
    try:
        with open('/proc/%d/stat' % pid) as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(')') + 2:].split()


def tagged_pids(tag):
    """Live (not zombie) processes whose environment holds the tag."""
    needle = ('SGLANG_STANDIN_TEST_TAG=%s' % tag).encode()
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/environ' % entry, 'rb') as handle:
                environ = handle.read().split(b'\0')
        except OSError:
            continue
        fields = _stat(int(entry))
        if needle in environ and fields and fields[0] != 'Z':
            found.append(int(entry))
    return sorted(found)


class Standin:
    """One start of `python -m sglang.launch_server`, its output in a log file."""

    def __init__(self, workdir, args=(), env=None, port=None, model_args=True):
        self.workdir = workdir
        self.port = port or free_port()
        self.tag = uuid.uuid4().hex
        self.log_path = os.path.join(workdir, 'sglang-%s.log' % self.tag[:8])
        model = os.path.join(workdir, 'model')
        os.makedirs(model, exist_ok=True)
        # SGLANG_STANDIN_TEST_PYTHON runs the stand-in on another interpreter (the targets run 3.9 to 3.12)
        self.argv = [os.environ.get('SGLANG_STANDIN_TEST_PYTHON') or sys.executable, '-m', 'sglang.launch_server']
        if model_args:
            self.argv += ['--model-path', model, '--port', str(self.port)]
        self.argv += list(args)
        self.env = dict(os.environ)
        self.env.update(FAST)
        self.env['SGLANG_STANDIN_FAULT_FILE'] = os.path.join(workdir, 'no-fault-file')
        self.env.pop('SGLANG_STANDIN_FAULT', None)
        self.env.update(env or {})
        self.env['PYTHONPATH'] = os.pathsep.join(filter(None, [STANDIN, (env or {}).get('PYTHONPATH')]))
        self.env['SGLANG_STANDIN_TEST_TAG'] = self.tag
        self.proc = None
        self.started = None

    def start(self):
        with open(self.log_path, 'wb') as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.workdir, env=self.env)
        self.started = time.monotonic()
        return self

    def log(self):
        with open(self.log_path, errors='replace') as handle:
            return handle.read()

    def raw_log(self):
        """The log with its carriage returns (log() reads them as newlines)."""
        with open(self.log_path, errors='replace', newline='') as handle:
            return handle.read()

    def wait_for(self, text, timeout=15):
        """Seconds from start until text is in the log; fails when the process exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return time.monotonic() - self.started
            if self.proc.poll() is not None and text not in self.log():
                pytest.fail('exited %s before %r appeared:\n%s' % (self.proc.returncode, text, self.log()))
            time.sleep(0.02)
        pytest.fail('%r not in the log after %ss:\n%s' % (text, timeout, self.log()))

    def wait_exit(self, timeout=15):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail('still running after %ss:\n%s' % (timeout, self.log()))

    def terminate(self, timeout=2.0):
        """SIGTERM; (exit status, seconds it took)."""
        tic = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        status = self.wait_exit(timeout)
        return status, time.monotonic() - tic

    def rank_pids(self):
        """The rank processes, in the order the main process started them (TP0 first)."""
        ranks = [pid for pid in self.pids() if pid != self.proc.pid]
        return sorted(ranks, key=lambda pid: (int((_stat(pid) or [0] * 20)[19]), pid))

    def request(self, method, path, body=None, key=None, timeout=10):
        """(status, text); ConnectionRefusedError while the port is closed."""
        headers = {'Content-Type': 'application/json'}
        if key:
            headers['Authorization'] = 'Bearer %s' % key
        conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=timeout)
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            response = conn.getresponse()
            return response.status, response.read().decode()
        finally:
            conn.close()

    def pids(self):
        return tagged_pids(self.tag)

    def assert_gone(self, timeout=2.0):
        deadline = time.monotonic() + timeout
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not self.pids(), 'left running: %s' % self.pids()

    def kill_all(self):
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.proc and self.proc.poll() is None:
            self.proc.wait()


@pytest.fixture
def standin(tmp_path):
    """Factory: standin(args=[...], env={...}) -> a started Standin; all its processes killed at teardown."""
    started = []

    def start(args=(), env=None, **kwargs):
        server = Standin(str(tmp_path), args, env, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill_all()


@pytest.fixture
def node(standin):
    """Factory: node(node_rank, dist_port, args=[...], env={...}, tp=2) -> a started Standin playing one
    node of a two-node launch (`--tp TP --nnodes 2 --node-rank R --dist-init-addr 127.0.0.1:DIST`)."""

    def start(node_rank, dist_port, args=(), env=None, tp=2, **kwargs):
        multi = ['--tp', str(tp), '--nnodes', '2', '--node-rank', str(node_rank),
                 '--dist-init-addr', '127.0.0.1:%d' % dist_port]
        return standin(multi + list(args), env, **kwargs)

    return start
