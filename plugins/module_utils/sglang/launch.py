# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start, watch and stop an SGLang server: as a systemd unit, or as a process group of our own.

Both managers answer the same questions: which PIDs make up the server now, is the server we
started still alive (and if not, how did it end), and stop everything it started. SGLang's
scheduler ranks are child processes, and orphans keep GPU memory, so "the server" is always the
whole tree (the unit's cgroup, or the process group plus descendants), never just the main PID.
"""

from __future__ import annotations

import errno
import os
import signal
import time

from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs
from ansible_collections.inferops.gpu.plugins.module_utils._common.environment_file import parse_environment_file
# Re-exported: the server's modules and tests name them through this module.
from ansible_collections.inferops.gpu.plugins.module_utils._common.spawn import LaunchError, describe_exit, spawn  # noqa: F401

_SHOW_PROPERTIES = ('MainPID', 'ActiveState', 'SubState', 'Result', 'ExecMainCode', 'ExecMainStatus',
                    'ControlGroup', 'InvocationID', 'NRestarts', 'LoadState', 'ActiveEnterTimestampMonotonic')


def invocation_key(props):
    """A unit's run from `systemctl show` properties; the same key sglang_liveness.py uses."""
    return props.get('InvocationID') or 'active-since:%s' % props.get('ActiveEnterTimestampMonotonic', '')


def self_killed_after_drain(props):
    """A unit that failed only because its main process ended by SIGKILL while stopping."""
    return (props.get('ActiveState') == 'failed' and props.get('Result') == 'signal'
            and props.get('ExecMainCode') == '2' and props.get('ExecMainStatus') == str(int(signal.SIGKILL)))


def wait_gone(pids, alive, timeout, clock, sleep):
    """The pids of `pids` still alive after `timeout` seconds at most."""
    end = clock() + timeout
    remaining = [p for p in pids if alive(p)]
    while remaining and clock() < end:
        sleep(0.1)
        remaining = [p for p in remaining if alive(p)]
    return remaining


class ProcessManager:
    """A command line in its own session (process group = its PID), output appended to the log.

    The pidfile holds "PID STARTTIME" so a recycled PID is never mistaken for the server.
    """

    def __init__(self, pidfile, command=None, environment=None, environment_files=(), chdir=None, log_path=None,
                 proc='/proc', kill=os.kill, clock=time.monotonic, sleep=time.sleep):
        self.pidfile = pidfile
        self.command = command
        self.environment = environment or {}
        self.environment_files = list(environment_files)
        self.chdir = chdir
        self.log_path = log_path
        self.proc = proc
        self.kill = kill
        self.clock = clock
        self.sleep = sleep
        self.child = None
        self.exit_status = None

    def _recorded(self):
        try:
            with open(self.pidfile) as handle:
                fields = handle.read().split()
            return int(fields[0]), int(fields[1])
        except (IOError, OSError, ValueError, IndexError):
            return None, None

    def main_pid(self):
        pid, starttime = self._recorded()
        if pid is None or not procfs.alive(pid, self.proc):
            return None
        entry = procfs.process_table(self.proc).get(pid)
        if entry is None or entry.starttime != starttime:
            return None
        return pid

    def identity(self):
        """Which run of the server this is ('pid:PID:STARTTIME'), or None when none runs."""
        pid, starttime = self._recorded()
        return 'pid:%d:%d' % (pid, starttime) if self.main_pid() else None

    def pids(self):
        """The leader's group and descendants, and the group's orphans after the leader died."""
        pid, starttime = self._recorded()
        if pid is None:
            return []
        table = procfs.process_table(self.proc)
        leader = table.get(pid)
        members = set(procfs.group(table, pid))
        if leader is not None and leader.starttime == starttime and leader.state != 'Z':
            members.update(procfs.tree(table, pid))
        return sorted(p for p in members if table[p].state != 'Z')

    def start(self):
        env = dict(os.environ)
        env.update(self.environment)
        for path in self.environment_files:
            try:
                with open(path) as handle:
                    env.update(parse_environment_file(handle.read()))
            except (IOError, OSError) as exc:
                raise LaunchError('cannot read the environment file %s: %s' % (path, exc))
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            pid = spawn(self.command, env, self.chdir, fd)
        finally:
            os.close(fd)
        self.child = pid
        self.exit_status = None
        entry = procfs.process_table(self.proc).get(pid)
        with open(self.pidfile, 'w') as handle:
            handle.write('%d %d\n' % (pid, entry.starttime if entry else 0))
        return pid

    def attach(self):
        """Watch the recorded server (nothing to remember: the pidfile names it)."""

    def _reap(self):
        """Our own child's exit status, once (it would stay a zombie otherwise)."""
        if self.child is not None and self.exit_status is None:
            try:
                pid, status = os.waitpid(self.child, os.WNOHANG)
            except OSError:
                return None
            if pid:
                self.exit_status = status
        return self.exit_status

    def status(self):
        """(alive, how it ended) of the server this manager started, or of the recorded one."""
        if self.child is not None:
            status = self._reap()
            if status is None:
                return True, None
            if os.WIFSIGNALED(status):
                return False, describe_exit(sig=os.WTERMSIG(status))
            return False, describe_exit(code=os.WEXITSTATUS(status))
        return (True, None) if self.main_pid() else (False, 'not running')

    def stop(self, timeout):
        """SIGTERM to the main process, SIGKILL to the group and tree after `timeout`; returns (stopped
        pids, survivors).

        As systemd's KillMode=mixed: SGLang drains its requests in flight in the main process, while
        its scheduler and detokenizer processes, which have no SIGTERM handler, keep serving them, and
        then ends them itself. A SIGTERM to every process would kill the ranks mid-request.
        """
        pids = self.pids()
        pid, dummy = self._recorded()
        if pid and self._alive(pid):
            self._signal_all(None, [pid], signal.SIGTERM)
        else:
            self._signal_all(pid, pids, signal.SIGTERM)
        alive = self._alive
        survivors = wait_gone(pids, alive, timeout, self.clock, self.sleep)
        if survivors:
            self._signal_all(pid, survivors, signal.SIGKILL)
            survivors = wait_gone(survivors, alive, 10, self.clock, self.sleep)
        if not survivors:
            try:
                os.unlink(self.pidfile)
            except OSError:
                pass
        return pids, survivors

    def _alive(self, pid):
        if pid == self.child:
            self._reap()
        return procfs.alive(pid, self.proc)

    def _signal_all(self, leader, pids, sig):
        targets = ([-leader] if leader else []) + list(pids)
        for target in targets:
            try:
                self.kill(target, sig)
            except OSError as exc:
                if exc.errno not in (errno.ESRCH, errno.EPERM):
                    raise


class SystemdManager:
    """A unit the role wrote. `run` is a bounded run_command (argv -> rc, out, err)."""

    def __init__(self, unit, run, cgroup_root='/sys/fs/cgroup', proc='/proc', clock=time.monotonic,
                 sleep=time.sleep):
        self.unit = unit
        self.run = run
        self.cgroup_root = cgroup_root
        self.proc = proc
        self.clock = clock
        self.sleep = sleep
        self.invocation = None
        self.restarts = None

    def show(self):
        rc, out, err = self.run(['systemctl', 'show', self.unit, '--property=' + ','.join(_SHOW_PROPERTIES)])
        if rc != 0:
            raise LaunchError('systemctl show %s failed: %s' % (self.unit, (err or out).strip()))
        props = {}
        for line in out.splitlines():
            key, sep, value = line.partition('=')
            if sep:
                props[key] = value
        if props.get('LoadState') == 'not-found':
            raise LaunchError('the unit %s does not exist (the sglang_server role writes it)' % self.unit)
        return props

    def _cgroup_pids(self, cgroup):
        pids = set()
        if not cgroup:
            return pids
        for root in (self.cgroup_root, os.path.join(self.cgroup_root, 'systemd'), os.path.join(self.cgroup_root, 'unified')):
            top = root + cgroup
            for dirpath, dummy, files in os.walk(top):
                if 'cgroup.procs' in files:
                    try:
                        with open(os.path.join(dirpath, 'cgroup.procs')) as handle:
                            pids.update(int(x) for x in handle.read().split())
                    except (IOError, OSError, ValueError):
                        pass
            if pids:
                break
        return pids

    def pids(self, props=None):
        props = props or self.show()
        pids = self._cgroup_pids(props.get('ControlGroup'))
        main = int(props.get('MainPID') or 0)
        if not pids and main:
            pids = set(procfs.tree(procfs.process_table(self.proc), main))
        return sorted(p for p in pids if procfs.alive(p, self.proc))

    def main_pid(self):
        props = self.show()
        main = int(props.get('MainPID') or 0)
        return main if main and props.get('ActiveState') in ('active', 'activating', 'reloading') else None

    def identity(self):
        """Which run of the unit this is: its InvocationID, as sglang_liveness keys its count (systemd
        older than 232 has none: the time it became active tells one run from the next as well)."""
        props = self.show()
        if props.get('ActiveState') not in ('active', 'activating', 'reloading') or not int(props.get('MainPID') or 0):
            return None
        return invocation_key(props)

    def start(self):
        # After a crash the unit waits out RestartSec in auto-restart, and a start job would wait with
        # it: a stop cancels that restart, so the start below runs at once.
        if self.show().get('SubState') == 'auto-restart':
            self.run(['systemctl', 'stop', self.unit])
        self.run(['systemctl', 'reset-failed', self.unit])  # a start limit hit by an earlier failure
        rc, out, err = self.run(['systemctl', 'start', self.unit])
        props = self.show()
        if rc != 0:
            raise LaunchError('systemctl start %s failed (%s): %s' % (self.unit, self._ended(props), (err or out).strip()))
        self.invocation = props.get('InvocationID')
        self.restarts = props.get('NRestarts')
        return int(props.get('MainPID') or 0)

    def attach(self):
        """Watch the run in progress: a restart by systemd from here on counts as an exit."""
        props = self.show()
        self.invocation = props.get('InvocationID')
        self.restarts = props.get('NRestarts')

    @staticmethod
    def _ended(props):
        code = props.get('ExecMainCode')
        status = props.get('ExecMainStatus')
        if code in ('2', '3'):  # CLD_KILLED, CLD_DUMPED
            return describe_exit(sig=int(status or 0))
        if props.get('Result') not in (None, '', 'success') or status not in (None, '', '0'):
            return '%s, result %s' % (describe_exit(code=status), props.get('Result'))
        return describe_exit(code=status or 0)

    def status(self):
        props = self.show()
        active = props.get('ActiveState')
        if (active in ('active', 'activating', 'reloading') and props.get('SubState') != 'auto-restart'
                and int(props.get('MainPID') or 0)
                and (self.invocation is None or props.get('InvocationID') == self.invocation)
                and (self.restarts is None or props.get('NRestarts') == self.restarts)):
            return True, None
        if self.invocation is None and active not in ('failed',) and not int(props.get('MainPID') or 0):
            return False, 'not running'
        return False, self._ended(props)

    def stop(self, timeout):
        """Stop the unit (SIGTERM to the main process: KillMode=mixed) and wait `timeout` seconds at
        most, then SIGKILL what is left: the unit's TimeoutStopSec is the operator's drain limit, a
        caller may need less (a start that failed its gate serves nobody)."""
        props = self.show()
        pids = self.pids(props)
        rc, out, err = self.run(['systemctl', 'stop', '--no-block', self.unit])
        if rc != 0:
            raise LaunchError('systemctl stop %s failed: %s' % (self.unit, (err or out).strip()))
        after, killed = self._wait_stopped(timeout), False
        if after is None:
            killed = True
            self.run(['systemctl', 'kill', '--signal=SIGKILL', self.unit])
            after = self._wait_stopped(30) or self.show()
        survivors = wait_gone(pids, lambda p: procfs.alive(p, self.proc), 10, self.clock, self.sleep)
        if not killed and self_killed_after_drain(after):
            # sglang 0.5.9 ends its drain with kill_process_tree(include_parent=True): a SIGKILL to
            # itself. systemd marks the unit failed for the stop this module asked for; a stop that
            # timed out, was ended by SIGKILL here, or a crash stays failed.
            self.run(['systemctl', 'reset-failed', self.unit])
        return pids, survivors

    def _wait_stopped(self, timeout):
        """The unit's properties once it is inactive or failed, None after `timeout` seconds."""
        end = self.clock() + timeout
        while True:
            props = self.show()
            if props.get('ActiveState') in ('inactive', 'failed'):
                return props
            if self.clock() >= end:
                return None
            self.sleep(0.2)
