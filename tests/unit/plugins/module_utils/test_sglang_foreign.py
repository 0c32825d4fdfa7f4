# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang servers the collection does not run (issue 42), found in the real /proc: a process of a venv's interpreter
whose command line is a server's, started as the by-hand upgrade did (nohup, its log in a data directory), holding
a real listening socket."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.sglang import foreign
from ports import free_port

# Listens on the port given, as the server would, and waits.
LISTEN = ('import socket, sys, time; s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[-1]))); s.listen(); '
          'print("ready", flush=True); time.sleep(120)')


@pytest.mark.parametrize('argv, server', [
    (['/home/ubuntu/sglang-env/bin/python', '-m', 'sglang.launch_server', '--model-path', '/m'], True),
    (['python3', '-m', 'sglang.launch_server'], True),
    (['/home/ubuntu/sglang-env/bin/sglang', 'serve', '--model-path', '/m'], True),
    (['python3', '-c', 'print(1)', 'sglang.launch_server'], False),
    (['bash', '-c', 'grep sglang.launch_server /var/log/x'], False),
    (['/usr/bin/python3', '-m', 'sglang_router.launch_router'], False),
])
def test_a_server_is_known_by_its_command_line(argv, server):
    assert foreign.is_server(argv) is server


def test_secrets_on_the_command_line_are_masked():
    assert foreign.mask(['python', '-m', 'sglang.launch_server', '--api-key', 's3cr3t', '--admin-api-key=adm1n',
                         '--hf-token', 'hf_x', '--port', '30000']) == (
        'python -m sglang.launch_server --api-key *** --admin-api-key=*** --hf-token *** --port 30000')


@pytest.fixture
def hand_server(tmp_path):
    """(pid, venv, log, port): a venv's interpreter running a server's command line under nohup, in a data dir."""
    venv = tmp_path / 'sglang-env'
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(venv)], check=True, timeout=120)
    data = tmp_path / 'data'
    data.mkdir()
    log = data / 'sglang.log'
    port = free_port()
    # The words of a server's command line after the listening text (python does not read them), under nohup.
    with open(str(log), 'w') as handle:
        proc = subprocess.Popen(['nohup', str(venv / 'bin' / 'python'), '-c', LISTEN, '-m', 'sglang.launch_server',
                                 '--api-key', 's3cr3t', str(port)],
                                stdout=handle, stderr=subprocess.STDOUT, cwd=str(data))
    deadline = time.monotonic() + 30
    while 'ready' not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    yield proc.pid, str(venv), str(log), str(data), port
    proc.kill()
    proc.wait(timeout=30)


def test_a_hand_started_server_is_found_with_its_venv_log_and_port_and_refused(hand_server):
    pid, venv, log, data, port = hand_server
    found = [server for server in foreign.find(port, 'sglang-server.service') if server['pid'] == pid]
    assert len(found) == 1, foreign.find(port, 'sglang-server.service')
    server = found[0]
    assert (server['venv'], server['log'], server['cwd'], server['port'], server['gpus']) == (venv, log, data, True, [])
    assert server['python'] == venv + '/bin/python'
    assert 's3cr3t' not in server['cmdline'] and '--api-key ***' in server['cmdline']
    problems, warnings = foreign.judge(found, port)
    assert warnings == [] and len(problems) == 1
    assert problems[0].startswith('an SGLang server the collection does not run: PID %d (' % pid)
    assert ('from %s, working directory %s, log %s, holding port %d: the collection\'s server cannot start beside it; '
            'stop it (kill -TERM %d: its drain finishes the requests in flight) before the run'
            % (venv, data, log, port, pid)) in problems[0]


def test_the_collections_own_server_and_another_port_are_not_refused(hand_server):
    pid, _venv, _log, _data, port = hand_server
    assert [s for s in foreign.find(port, 'x.service', own_pids=[pid]) if s['pid'] == pid] == []
    other = [s for s in foreign.find(port + 1, 'x.service', gpu_pids=[]) if s['pid'] == pid]
    assert other[0]['port'] is False
    problems, warnings = foreign.judge(other, port + 1)
    assert problems == [] and warnings[0].startswith('an SGLang server the collection does not run: PID %d' % pid)
    on_gpu = [s for s in foreign.find(port + 1, 'x.service', gpu_pids=[pid]) if s['pid'] == pid]
    problems, _warnings = foreign.judge(on_gpu, port + 1)
    assert 'holding the GPUs (PID %d)' % pid in problems[0]


def test_the_module_refuses_the_hand_server_and_knows_the_process_managers_own(hand_server, tmp_path, monkeypatch):
    from ansible_collections.inferops.gpu.plugins.modules import sglang_foreign
    from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs
    from module_harness import invoke, patch_exits
    patch_exits(monkeypatch)
    pid, _venv, _log, _data, port = hand_server
    result = invoke(sglang_foreign, {'port': port, 'gpus': False})
    assert result.get('failed') and 'PID %d' % pid in result['msg'] and 'holding port %d' % port in result['msg']
    pidfile = tmp_path / 'sglang-server.pid'
    pidfile.write_text('%d %d\n' % (pid, procfs.read_proc(pid).starttime))
    result = invoke(sglang_foreign, {'port': port, 'gpus': False, 'pidfile': str(pidfile)})
    assert not result.get('failed') and [s for s in result['servers'] if s['pid'] == pid] == []
    # A pidfile whose process started at another time names another process: not the collection's.
    pidfile.write_text('%d 1\n' % pid)
    assert invoke(sglang_foreign, {'port': port, 'gpus': False, 'pidfile': str(pidfile)}).get('failed')


def test_the_modules_options_match_its_documentation(monkeypatch):
    from ansible_collections.inferops.gpu.plugins.modules import sglang_foreign
    from module_harness import assert_options_match_spec, invoke, patch_exits, record_argument_spec
    patch_exits(monkeypatch)
    seen = record_argument_spec(monkeypatch, sglang_foreign)
    assert not invoke(sglang_foreign, {'port': free_port(), 'gpus': False}).get('failed')
    assert_options_match_spec(sglang_foreign, seen)


# A server's drain as SGLang's main process does it: on SIGTERM it ends its rank (a child that has no handler), then
# itself; the rank would otherwise outlive it.
DRAINING = ('import os, signal, subprocess, sys, time\n'
            'rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])\n'
            'def drain(*_):\n'
            '    time.sleep(0.3); rank.terminate(); rank.wait(); print("drained", flush=True); sys.exit(0)\n'
            'signal.signal(signal.SIGTERM, drain)\n'
            'print("ready", rank.pid, flush=True)\n'
            'time.sleep(120)\n')


def _start(tmp_path, code):
    log = tmp_path / 'hand.log'
    with open(str(log), 'w') as handle:
        proc = subprocess.Popen([sys.executable, '-c', code, '-m', 'sglang.launch_server'], stdout=handle,
                                stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while 'ready' not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc, log


def test_adopted_the_server_is_a_warning_and_is_stopped_through_its_drain(tmp_path):
    from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs
    proc, log = _start(tmp_path, DRAINING)
    rank = int(log.read_text().split()[1])
    try:
        server = [s for s in foreign.find(0, 'x.service', gpu_pids=[rank]) if s['pid'] == proc.pid][0]
        assert server['pids'] == sorted([proc.pid, rank]) and server['start'] == procfs.read_proc(proc.pid).starttime
        problems, warnings = foreign.judge([server], 0, adopt=True)
        assert problems == [] and 'adopted, it is stopped (SIGTERM, its drain) right before' in warnings[0]
        # A PID whose start time differs is another process: left alone.
        assert foreign.stop([dict(server, start=server['start'] + 1)], 5) == ([], [])
        assert procfs.alive(proc.pid)
        stopped, survivors = foreign.stop([server], 10)
        assert (stopped, survivors) == (sorted([proc.pid, rank]), [])
        assert proc.wait(timeout=10) == 0 and 'drained' in log.read_text()
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_server_that_ignores_sigterm_is_killed_after_the_drain_limit(tmp_path):
    proc, _log = _start(tmp_path, 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); '
                                  'print("ready", flush=True); time.sleep(120)')
    try:
        server = [s for s in foreign.find(0, 'x.service') if s['pid'] == proc.pid][0]
        began = time.monotonic()
        assert foreign.stop([server], 1) == ([proc.pid], [])
        assert proc.wait(timeout=10) == -9 and time.monotonic() - began >= 1
    finally:
        proc.kill()
        proc.wait(timeout=30)
