# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Both managers: real process groups for `process`, recorded systemctl answers for `systemd`."""

from __future__ import annotations

import os
import sys
import time

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.launch import (
    LaunchError, ProcessManager, SystemdManager, describe_exit,
)

# A "server" with two ranks; the ranks ignore SIGTERM like a rank stuck in a CUDA call.
RANKS_IGNORING_TERM = (
    "import os, signal, subprocess, sys, time\n"
    "kids = [subprocess.Popen([sys.executable, '-c', 'import signal, time; "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(\"rank up\", flush=True); time.sleep(600)']) for _ in range(2)]\n"
    "print('main up', flush=True)\n"
    "time.sleep(600)\n"
)


def wait_for(predicate, seconds=10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def manager(tmp_path):
    mgr = ProcessManager(str(tmp_path / 'server.pid'), command=[sys.executable, '-c', RANKS_IGNORING_TERM],
                         environment={'INFEROPS_PROBE': '1'}, chdir=str(tmp_path), log_path=str(tmp_path / 'server.log'))
    yield mgr
    for pid in mgr.pids():
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def test_process_manager_runs_the_whole_tree_in_its_own_group_and_kills_it(manager, tmp_path):
    pid = manager.start()
    assert wait_for(lambda: open(str(tmp_path / 'server.log')).read().count('up') == 3)
    assert os.getpgid(pid) == pid != os.getpgid(0)
    pids = manager.pids()
    assert len(pids) == 3 and pid in pids
    assert manager.status() == (True, None)
    assert oct(os.stat(str(tmp_path / 'server.log')).st_mode & 0o777) == '0o640'
    started = time.monotonic()
    stopped, survivors = manager.stop(timeout=1)
    assert sorted(stopped) == pids and survivors == []
    assert time.monotonic() - started < 5  # SIGKILL after the 1 s grace, not a hang
    assert not any(procfs.alive(p) for p in pids)
    assert not os.path.exists(str(tmp_path / 'server.pid'))


# SGLang's shape at a stop: the main process drains on SIGTERM while its ranks (no SIGTERM handler,
# so a SIGTERM kills them) finish the requests; then it ends them itself (kill_process_tree).
DRAINING_MAIN = (
    "import signal, subprocess, sys, time\n"
    "kids = [subprocess.Popen([sys.executable, '-c', 'import time; print(\"rank up\", flush=True); time.sleep(600)'])"
    " for _ in range(2)]\n"
    "def drain(signum, frame):\n"
    "    time.sleep(0.5)\n"
    "    print('ranks alive after the drain: %d' % sum(k.poll() is None for k in kids), flush=True)\n"
    "    for k in kids: k.kill()\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, drain)\n"
    "print('main up', flush=True)\n"
    "time.sleep(600)\n"
)


def test_a_stop_signals_the_main_process_only_so_the_ranks_serve_the_drain(tmp_path):
    log = tmp_path / 'server.log'
    mgr = ProcessManager(str(tmp_path / 'server.pid'), command=[sys.executable, '-c', DRAINING_MAIN],
                         chdir=str(tmp_path), log_path=str(log))
    mgr.start()
    assert wait_for(lambda: log.read_text().count('up') == 3)
    pids = mgr.pids()
    stopped, survivors = mgr.stop(timeout=10)
    assert sorted(stopped) == pids and survivors == []
    # A SIGTERM to the whole group (KillMode=control-group) would have killed both ranks at once.
    assert 'ranks alive after the drain: 2' in log.read_text()
    assert not any(procfs.alive(p) for p in pids)


def test_process_manager_reports_how_the_server_ended(tmp_path):
    mgr = ProcessManager(str(tmp_path / 'p.pid'), command=[sys.executable, '-c', 'import sys; sys.exit(3)'],
                         log_path=str(tmp_path / 'l.log'))
    mgr.start()
    assert wait_for(lambda: not mgr.status()[0])
    assert mgr.status() == (False, 'exited with status 3')


def test_a_fresh_manager_finds_the_server_through_the_pidfile_and_not_a_recycled_pid(manager, tmp_path):
    pid = manager.start()
    other = ProcessManager(manager.pidfile)
    assert other.main_pid() == pid and other.status() == (True, None)
    with open(manager.pidfile, 'w') as handle:
        handle.write('%d 1\n' % pid)  # same PID, another start time: a recycled PID
    assert other.main_pid() is None and other.status() == (False, 'not running')


def test_a_missing_binary_is_a_launch_error(tmp_path):
    mgr = ProcessManager(str(tmp_path / 'p.pid'), command=['/nonexistent/python'], log_path=str(tmp_path / 'l.log'))
    with pytest.raises(LaunchError, match='/nonexistent/python'):
        mgr.start()


def test_describe_exit():
    assert describe_exit(code=1) == 'exited with status 1'
    assert describe_exit(sig=9) == 'killed by signal SIGKILL'


SHOW_RUNNING = """MainPID={main}
ActiveState=active
SubState=running
Result=success
ExecMainCode=0
ExecMainStatus=0
ControlGroup=/system.slice/sglang-server.service
InvocationID=aaa
NRestarts=0
LoadState=loaded
"""
SHOW_AUTO_RESTART = """MainPID=0
ActiveState=activating
SubState=auto-restart
Result=exit-code
ExecMainCode=1
ExecMainStatus=1
ControlGroup=/system.slice/sglang-server.service
InvocationID=aaa
NRestarts=0
LoadState=loaded
"""


class Systemctl:
    def __init__(self, shows, start_rc=0):
        self.shows = list(shows)
        self.start_rc = start_rc
        self.calls = []

    def __call__(self, argv, timeout=None):
        self.calls.append(list(argv))
        if argv[1] == 'show':
            text = self.shows.pop(0) if len(self.shows) > 1 else self.shows[0]
            return 0, text, ''
        if argv[1] == 'start':
            return self.start_rc, '', 'Job for sglang-server.service failed.' if self.start_rc else ''
        return 0, '', ''


def cgroup(tmp_path, pids):
    root = tmp_path / 'cgroup'
    unit = root / 'system.slice' / 'sglang-server.service'
    unit.mkdir(parents=True)
    (unit / 'cgroup.procs').write_text(''.join('%d\n' % p for p in pids))
    return str(root)


def test_systemd_manager_reads_the_cgroup_and_sees_an_auto_restart_as_an_exit(tmp_path):
    me = os.getpid()
    # start() reads the unit before and after its start.
    systemctl = Systemctl([SHOW_RUNNING.format(main=me), SHOW_RUNNING.format(main=me), SHOW_RUNNING.format(main=me),
                           SHOW_AUTO_RESTART])
    mgr = SystemdManager('sglang-server.service', systemctl, cgroup_root=cgroup(tmp_path, [me]))
    assert mgr.start() == me
    assert ['systemctl', 'reset-failed', 'sglang-server.service'] in systemctl.calls
    assert mgr.pids() == [me]
    assert mgr.status() == (False, 'exited with status 1, result exit-code')


def test_systemd_manager_sees_a_restart_by_systemd_as_an_exit(tmp_path):
    me = os.getpid()
    restarted = SHOW_RUNNING.format(main=me).replace('InvocationID=aaa', 'InvocationID=bbb').replace('NRestarts=0', 'NRestarts=1')
    systemctl = Systemctl([SHOW_RUNNING.format(main=me), SHOW_RUNNING.format(main=me), restarted])
    mgr = SystemdManager('sglang-server.service', systemctl, cgroup_root=cgroup(tmp_path, [me]))
    mgr.start()
    assert mgr.status()[0] is False


def test_a_start_after_a_crash_does_not_wait_out_restart_sec(tmp_path):
    # A start job on a unit in auto-restart waits for its RestartSec; a stop first cancels that restart.
    me = os.getpid()
    systemctl = Systemctl([SHOW_AUTO_RESTART, SHOW_RUNNING.format(main=me)])
    mgr = SystemdManager('sglang-server.service', systemctl, cgroup_root=cgroup(tmp_path, [me]))
    assert mgr.start() == me
    verbs = [call[1] for call in systemctl.calls]
    assert verbs == ['show', 'stop', 'reset-failed', 'start', 'show'], systemctl.calls
    # A unit that is not waiting to restart is started without a stop.
    systemctl = Systemctl([SHOW_RUNNING.format(main=me).replace('ActiveState=active', 'ActiveState=inactive')
                           .replace('SubState=running', 'SubState=dead'), SHOW_RUNNING.format(main=me)])
    SystemdManager('sglang-server.service', systemctl, cgroup_root=cgroup(tmp_path / 'b', [me])).start()
    assert 'stop' not in [call[1] for call in systemctl.calls]


def test_the_identity_of_a_run_is_the_key_liveness_counts_by(tmp_path):
    from ansible_collections.inferops.gpu.plugins.module_utils.sglang import liveness as sglang_liveness
    me = os.getpid()
    running = SHOW_RUNNING.format(main=me) + 'ActiveEnterTimestampMonotonic=123456\n'
    mgr = SystemdManager('sglang-server.service', Systemctl([running]), cgroup_root=cgroup(tmp_path, [me]))
    assert mgr.identity() == 'aaa'
    without = running.replace('InvocationID=aaa\n', 'InvocationID=\n')
    mgr = SystemdManager('sglang-server.service', Systemctl([without]), cgroup_root=cgroup(tmp_path / 'b', [me]))
    assert mgr.identity() == 'active-since:123456' == sglang_liveness.invocation_key(sglang_liveness.parse_show(without))
    stopped = SystemdManager('sglang-server.service', Systemctl([SHOW_AUTO_RESTART]))
    assert stopped.identity() is None


def test_a_stop_after_which_the_server_killed_itself_leaves_the_unit_clean(tmp_path):
    # sglang 0.5.9 ends its drain with a SIGKILL to itself (kill_process_tree(include_parent=True)):
    # systemd marks the unit failed for the stop that was asked for.
    me = os.getpid()
    now = [0.0]

    def sleep(seconds):  # the stopped pids are waited for: this test's own process never goes
        now[0] += seconds
    self_killed = ('MainPID=0\nActiveState=failed\nSubState=failed\nResult=signal\nExecMainCode=2\n'
                   'ExecMainStatus=9\nControlGroup=\nInvocationID=aaa\nNRestarts=0\nLoadState=loaded\n')
    systemctl = Systemctl([SHOW_RUNNING.format(main=me), self_killed])
    SystemdManager('sglang-server.service', systemctl, cgroup_root=cgroup(tmp_path, []), clock=lambda: now[0],
                   sleep=sleep).stop(60)
    assert [call[1] for call in systemctl.calls] == ['show', 'stop', 'show', 'reset-failed']
    # A stop that ran out of time, or a server that crashed with another signal, stays failed.
    for n, failed in enumerate((self_killed.replace('Result=signal', 'Result=timeout'),
                                self_killed.replace('ExecMainStatus=9', 'ExecMainStatus=11'))):
        systemctl = Systemctl([SHOW_RUNNING.format(main=me), failed])
        SystemdManager('sglang-server.service', systemctl, cgroup_root=cgroup(tmp_path / str(n), []),
                       clock=lambda: now[0], sleep=sleep).stop(60)
        assert 'reset-failed' not in [call[1] for call in systemctl.calls]


def test_a_stop_that_outlasts_its_timeout_is_ended_by_sigkill_and_stays_failed(tmp_path):
    # SGLang's drain waits for every request (a warmup stuck for good too): past the caller's
    # timeout, which may be shorter than the unit's TimeoutStopSec, the unit's processes are killed.
    me = os.getpid()
    deactivating = SHOW_RUNNING.format(main=me).replace('ActiveState=active', 'ActiveState=deactivating')
    killed = ('MainPID=0\nActiveState=failed\nSubState=failed\nResult=signal\nExecMainCode=2\n'
              'ExecMainStatus=9\nControlGroup=\nInvocationID=aaa\nNRestarts=0\nLoadState=loaded\n')
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds

    systemctl = Systemctl([SHOW_RUNNING.format(main=me)] + [deactivating] * 30 + [killed])
    mgr = SystemdManager('sglang-server.service', systemctl, cgroup_root=cgroup(tmp_path, []), clock=lambda: now[0],
                         sleep=sleep)
    mgr.stop(5)
    assert ['systemctl', 'stop', '--no-block', 'sglang-server.service'] in systemctl.calls
    assert ['systemctl', 'kill', '--signal=SIGKILL', 'sglang-server.service'] in systemctl.calls
    # Killed here, not by itself after a drain: the failed state says so and stays.
    assert 'reset-failed' not in [call[1] for call in systemctl.calls]


def test_systemd_manager_names_a_missing_unit_and_a_failed_start(tmp_path):
    mgr = SystemdManager('nope.service', Systemctl(['LoadState=not-found\nActiveState=inactive\n']))
    with pytest.raises(LaunchError, match='nope.service does not exist'):
        mgr.start()
    failed = SHOW_AUTO_RESTART.replace('SubState=auto-restart', 'SubState=failed').replace('activating', 'failed')
    mgr = SystemdManager('sglang-server.service', Systemctl([failed], start_rc=1))
    with pytest.raises(LaunchError, match='failed.*exited with status 1'):
        mgr.start()


def test_environment_files_are_read_like_systemd_and_win_over_the_environment(tmp_path):
    from ansible_collections.inferops.gpu.plugins.module_utils.sglang.launch import parse_environment_file
    # The quoting runtime_env and the sglang_server role write (backslash, quote, dollar, backtick escaped).
    text = '# managed\nPATH="/usr/local/cuda-13.0/bin:/usr/bin"\nHF_TOKEN="hf_\\"x\\$y\\`z\\\\"\nPLAIN=1\n\nnot a line\n'
    assert parse_environment_file(text) == {'PATH': '/usr/local/cuda-13.0/bin:/usr/bin', 'HF_TOKEN': 'hf_"x$y`z\\', 'PLAIN': '1'}
    env_file = tmp_path / 'server.env'
    env_file.write_text('INFEROPS_A="from-file"\n')
    mgr = ProcessManager(str(tmp_path / 'p.pid'), log_path=str(tmp_path / 'l.log'),
                         command=[sys.executable, '-c', 'import os; print(os.environ["INFEROPS_A"], os.environ["INFEROPS_B"])'],
                         environment={'INFEROPS_A': 'from-option', 'INFEROPS_B': 'b'}, environment_files=[str(env_file)])
    mgr.start()
    assert wait_for(lambda: not mgr.status()[0])
    assert open(str(tmp_path / 'l.log')).read() == 'from-file b\n'
    missing = ProcessManager(str(tmp_path / 'q.pid'), log_path=str(tmp_path / 'l.log'), command=['true'],
                             environment_files=[str(tmp_path / 'absent.env')])
    with pytest.raises(LaunchError, match='absent.env'):
        missing.start()
