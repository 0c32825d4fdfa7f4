# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL smoke test: one all-reduce with a known sum and a bandwidth figure, over every GPU, with a deadline.

A node whose GPUs cannot talk peer-to-peer (ACS redirecting through the root complex, a translating
IOMMU) does not fail NCCL: it hangs it, or crawls. So the ranks run as processes of our own, each
in its own session, and are watched: a rank that dies ends the test at once (its peers would wait
for it forever), and at the deadline every rank's process group is killed. What each rank printed
last (its phase, NCCL's INFO lines) is what the report is made of, with the NCCL release the ranks
loaded (``nccl_version``, in every report once a rank said it): a venv's NCCL is what torch
resolved, not what a profile names.

The rank script is nccl_smoke_rank.py, written into a private directory and run with the torch
venv's python; this module itself never imports torch.
"""

from __future__ import annotations

import collections
import errno
import inspect
import json
import math
import os
import shutil
import signal
import socket
import tempfile
import time

from ansible_collections.inferops.gpu.plugins.module_utils.gpu import nccl_smoke_rank
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.health_checks import result as _result
from ansible_collections.inferops.gpu.plugins.module_utils._common.spawn import LaunchError, describe_exit
from ansible_collections.inferops.gpu.plugins.module_utils._common.spawn import spawn as fork_exec

DEFAULT_SIZE_BYTES = 64 << 20
DEFAULT_ITERS = 20
POLL_SECONDS = 0.05
# A rank killed with SIGKILL while inside the GPU driver can take a moment to die; past this the
# report says so rather than the module hanging on it.
REAP_SECONDS = 10.0
NCCL_TAIL = 20
RANK_TAIL = 20
OUTCOMES = ('ok', 'hang', 'crash', 'wrong_sum', 'no_result', 'not_started', 'skipped')

HANG_FIX = 'peer-to-peer blocked? (ACS/IOMMU); rerun with NCCL_P2P_DISABLE=1 to confirm'
WRONG_SUM_FIX = ('the GPUs\' peer-to-peer path returned bad data: check ACS/IOMMU (the pcie and p2p checks) and '
                 'rerun with NCCL_P2P_DISABLE=1; NaN means the elements of one buffer differ')
CRASH_HINT = ('read value.log_tail (the rank\'s last lines): a CUDA or NCCL error there names the cause '
              '(driver/toolkit mismatch, a GPU held by another process, peer access refused)')
NOT_STARTED_FIX = 'run the ml_env role (it builds the torch venv) or point the python option at a python with torch'


def rank_script_source():
    """The text of nccl_smoke_rank.py, from a checkout or from inside a module's AnsiballZ zip.

    inspect asks the module's loader (file or zipimport) for the source; where a loader has no
    get_source, its get_data reads the file itself. (pkgutil.get_data cannot stand in: in a checkout
    module_utils is a namespace package, whose loader reads no data.)
    """
    try:
        source = inspect.getsource(nccl_smoke_rank)
        if source:
            return source
    except (OSError, TypeError):
        pass
    loader = getattr(nccl_smoke_rank, '__loader__', None)
    try:
        return loader.get_data(nccl_smoke_rank.__file__).decode('utf-8')
    except (AttributeError, OSError, TypeError) as exc:
        raise LaunchError('the NCCL smoke rank script (nccl_smoke_rank.py) cannot be read from this module\'s '
                          'payload: %s' % exc)


def free_port(host='127.0.0.1'):
    """A TCP port nobody listens on now (the kernel's pick for port 0); torch's store binds it next."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, 0))
        return sock.getsockname()[1]
    finally:
        sock.close()


def rank_env(base, extra, rank, world_size, port, size_bytes, iters):
    """os.environ (base) + the caller's env + what a rank needs; NCCL_DEBUG=INFO unless the caller chose.

    Only the caller's env can turn the INFO lines off: a hang report without them says nothing about
    where NCCL stopped, and the controller's own environment is no deliberate choice for this test.
    """
    env = dict(base)
    env.pop('NCCL_DEBUG', None)
    env.update(extra or {})
    env.setdefault('NCCL_DEBUG', 'INFO')
    env.update({
        'RANK': str(rank), 'LOCAL_RANK': str(rank), 'WORLD_SIZE': str(world_size),
        'LOCAL_WORLD_SIZE': str(world_size), 'MASTER_ADDR': '127.0.0.1', 'MASTER_PORT': str(port),
        'SMOKE_SIZE_BYTES': str(size_bytes), 'SMOKE_ITERS': str(iters), 'PYTHONUNBUFFERED': '1',
    })
    return env


class RankLog:
    """Incremental reader of one rank's output file: complete lines, phase, result, tail."""

    def __init__(self, rank, path):
        self.rank = rank
        self.path = path
        self.offset = 0
        self.partial = ''
        self.phase = 'start'
        self.nccl_version = None
        self.result = None
        self.bad_result = None
        self.tail = collections.deque(maxlen=RANK_TAIL)

    def read(self, final=False):
        """New complete lines since the last read (the unterminated rest too when final)."""
        try:
            with open(self.path, 'rb') as handle:
                handle.seek(self.offset)
                data = handle.read()
        except (IOError, OSError):
            data = b''
        self.offset += len(data)
        text = self.partial + data.decode('utf-8', 'replace')
        lines = text.split('\n')
        self.partial = lines.pop()
        if final and self.partial:
            lines.append(self.partial)
            self.partial = ''
        lines = [line.rstrip('\r') for line in lines]
        for line in lines:
            self._take(line)
        return lines

    def _take(self, line):
        self.tail.append(line)
        if line.startswith('SMOKE phase '):
            self.phase = line[len('SMOKE phase '):].strip()
        elif line.startswith('SMOKE nccl '):
            self.nccl_version = line[len('SMOKE nccl '):].strip() or None
        elif line.startswith('SMOKE result '):
            try:
                parsed = json.loads(line[len('SMOKE result '):])
                if not isinstance(parsed, dict):
                    raise ValueError('not an object')
                self.result = parsed
                self.phase = 'done'
            except ValueError:
                self.bad_result = line


def _exit_of(pid):
    """How a child ended, without reaping it: the zombie keeps its PID and process group ID reserved,
    so killing the group later can never hit a recycled one. None while it runs."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return ('gone', None)
    if info is None or info.si_pid == 0:
        return None
    if info.si_code == os.CLD_EXITED:
        return ('code', info.si_status)
    return ('signal', info.si_status)


def _describe(ended):
    kind, number = ended
    if kind == 'signal':
        return describe_exit(sig=number)
    if kind == 'gone':
        return 'ended (exit status lost)'
    return describe_exit(code=number)


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError as exc:
        if exc.errno not in (errno.ESRCH, errno.EPERM):
            raise


def _reap_all(pids, clock, sleep):
    """Reap every rank (their groups were killed first); the PIDs still alive after REAP_SECONDS."""
    pending = list(pids)
    end = clock() + REAP_SECONDS
    while pending:
        still = []
        for pid in pending:
            try:
                done, dummy = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if not done:
                still.append(pid)
        pending = still
        if not pending or clock() >= end:
            break
        sleep(POLL_SECONDS)
    return pending


def _value(world_size, size_bytes, expected, outcome, seconds=None, busbw=None, reduced=None, ranks=None,
           log_tail=(), nccl_version=None):
    return {'world_size': world_size, 'seconds': seconds, 'busbw_gbps': busbw, 'size_bytes': size_bytes,
            'sum': reduced, 'expected': expected, 'ranks': dict(ranks or {}), 'outcome': outcome,
            'log_tail': list(log_tail), 'nccl_version': nccl_version}


def _label(world_size, nccl_version=None):
    return 'NCCL%s all-reduce smoke test over %d GPU%s' % (
        ' ' + nccl_version if nccl_version else '', world_size, '' if world_size == 1 else 's')


def _nccl_version(logs):
    """The release the first rank that said one runs (every rank runs the same python)."""
    return next((log.nccl_version for log in logs if log.nccl_version), None)


def _resolve_python(python, env):
    if not python:
        return None
    if os.sep not in python:
        return shutil.which(python, path=(env or {}).get('PATH', os.environ.get('PATH')))
    return python if os.path.isfile(python) and os.access(python, os.X_OK) else None


def _finite(number):
    return isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number)


def _judge(logs, world_size, expected):
    """(outcome, problems, hint, sum) once every rank exited 0: the sum check lives here, not in the ranks."""
    for log in logs:
        if log.result is None:
            why = 'an unreadable one: %s' % log.bad_result if log.bad_result else 'none'
            return ('no_result', ['rank %d exited 0 without a SMOKE result line (%s; last phase %s): the rank '
                                  'script was cut short or is not nccl_smoke_rank.py' % (log.rank, why, log.phase)],
                    CRASH_HINT, None)
    problems = []
    for log in logs:
        got = log.result.get('sum')
        if not _finite(got) or got != expected:
            shown = 'NaN' if got is None or (isinstance(got, float) and math.isnan(got)) else got
            problems.append('all-reduce returned %s on rank %d, expected %s: %s'
                            % (shown, log.rank, _number(expected), WRONG_SUM_FIX))
    first = logs[0].result.get('sum')
    reduced = first if _finite(first) else None
    if problems:
        return 'wrong_sum', problems, WRONG_SUM_FIX, reduced
    return 'ok', [], '', reduced


def _number(value):
    return int(value) if float(value).is_integer() else value


def run_smoke(python, world_size, deadline_s=60, env=None, size_bytes=DEFAULT_SIZE_BYTES, iters=DEFAULT_ITERS,
              workdir=None, clock=time.monotonic, sleep=time.sleep, spawn=fork_exec):
    """Run the smoke test over `world_size` local GPUs with `python` (the torch venv's); the shared result dict.

    spawn(argv, env, cwd, log_fd) -> pid must start argv as the leader of a new session (process
    group = pid) with stdout and stderr on log_fd, as sglang_launch.spawn does.
    """
    expected = _number(world_size * (world_size + 1) / 2.0) if world_size >= 1 else None
    if world_size < 1:
        return _result('skipped', _value(world_size, size_bytes, expected, 'skipped'),
                       'NCCL smoke test skipped: no GPU to run a rank on')
    label = _label(world_size)
    resolved = _resolve_python(python, env)
    if resolved is None:
        return _result('fail', _value(world_size, size_bytes, expected, 'not_started'), label + ': not started',
                       ['python %s is missing or not executable: %s' % (python or "''", NOT_STARTED_FIX)],
                       NOT_STARTED_FIX)

    tempdir = tempfile.mkdtemp(prefix='nccl-smoke-', dir=workdir)  # 0700: the script runs from here
    pids = {}
    try:
        result = _run(resolved, world_size, deadline_s, env, size_bytes, iters, tempdir, clock, sleep, spawn, pids,
                      label, expected)
    finally:
        # Nothing is left behind, whatever happened: every rank's group is killed (a rank that exited 0
        # may have left children in it; the unreaped leader keeps the group ID ours), then reaped.
        for pid in pids.values():
            _kill_group(pid)
        leftovers = _reap_all(pids.values(), clock, sleep)
        shutil.rmtree(tempdir, ignore_errors=True)
    if leftovers:  # pragma: no cover (a rank stuck in the kernel, inside the GPU driver)
        result['status'] = 'fail'
        result['problems'].append('rank processes %s did not die within %d s of SIGKILL (stuck in the GPU driver): '
                                  'check dmesg for Xid errors and reboot the node'
                                  % (', '.join(str(p) for p in leftovers), REAP_SECONDS))
    return result


def _run(python, world_size, deadline_s, env, size_bytes, iters, tempdir, clock, sleep, spawn, pids, label, expected):
    """Start the ranks (their PIDs go into `pids` as they start, for the caller's cleanup) and watch them."""
    logs = []
    nccl_lines = collections.deque(maxlen=NCCL_TAIL)
    started = clock()
    script = os.path.join(tempdir, 'nccl_smoke_rank.py')
    try:
        source = rank_script_source()
    except (LaunchError, OSError, ImportError) as exc:
        return _result('fail', _value(world_size, size_bytes, expected, 'not_started'), label + ': not started',
                       ['%s: reinstall the inferops.gpu collection' % exc], 'reinstall the inferops.gpu collection')
    with open(script, 'w') as handle:
        handle.write(source)
    port = free_port()
    for rank in range(world_size):
        log_path = os.path.join(tempdir, 'rank%d.log' % rank)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            pids[rank] = spawn([python, script], rank_env(os.environ, env, rank, world_size, port, size_bytes, iters),
                               tempdir, fd)
        except LaunchError as exc:
            return _result('fail', _value(world_size, size_bytes, expected, 'not_started', ranks=_phases(logs)),
                           label + ': not started', ['rank %d: %s: %s' % (rank, exc, NOT_STARTED_FIX)],
                           NOT_STARTED_FIX)
        finally:
            os.close(fd)
        logs.append(RankLog(rank, log_path))

    last_output = clock()
    ended = {}
    failed = []
    while True:
        for log in logs:
            new = log.read()
            if new:
                last_output = clock()
            nccl_lines.extend('[rank %d] %s' % (log.rank, line) for line in new if 'NCCL' in line)
        for rank, pid in pids.items():
            if rank not in ended:
                how = _exit_of(pid)
                if how is not None:
                    ended[rank] = how
                    if how != ('code', 0):
                        failed.append(rank)
        if failed or len(ended) == world_size:
            break
        if clock() - started >= deadline_s:
            break
        sleep(POLL_SECONDS)
    for log in logs:  # what the ranks wrote between the last read and their end
        nccl_lines.extend('[rank %d] %s' % (log.rank, line) for line in log.read(final=True) if 'NCCL' in line)
    seconds = round(clock() - started, 3)
    version = _nccl_version(logs)
    label = _label(world_size, version)

    if failed:
        first = logs[failed[0]]
        problems = []
        for rank in failed:
            last = [line for line in logs[rank].tail if line.strip()]
            problems.append('rank %d %s in phase %s: %s' % (
                rank, _describe(ended[rank]), logs[rank].phase, last[-1] if last else 'no output'))
        return _result('fail', _value(world_size, size_bytes, expected, 'crash', seconds, ranks=_phases(logs),
                                      log_tail=first.tail, nccl_version=version),
                       '%s: rank %d crashed after %s s' % (label, first.rank, seconds), problems, CRASH_HINT)
    if len(ended) < world_size:
        quiet = int(round(clock() - last_output))
        stuck = ', '.join('rank %d %s' % (log.rank, log.phase) for log in logs)
        # A rendezvous that never completes hangs before NCCL prints anything: then the ranks' own lines.
        tail = list(nccl_lines) or ['[rank %d] %s' % (log.rank, line) for log in logs for line in log.tail]
        return _result('fail', _value(world_size, size_bytes, expected, 'hang', seconds, ranks=_phases(logs),
                                      log_tail=tail, nccl_version=version),
                       '%s: hung, killed at the %s s deadline' % (label, deadline_s),
                       ['no progress in %d s: %s (last phase: %s)' % (quiet, HANG_FIX, stuck)], HANG_FIX)

    outcome, problems, hint, reduced = _judge(logs, world_size, expected)
    busbw = logs[0].result.get('busbw_gbps') if logs[0].result else None
    busbw = round(busbw, 3) if _finite(busbw) else None
    tail = nccl_lines if outcome != 'no_result' else [t for log in logs if log.result is None for t in log.tail]
    value = _value(world_size, size_bytes, expected, outcome, seconds, busbw, reduced, _phases(logs), tail, version)
    if outcome == 'ok':
        return _result('ok', value, '%s: sum %s as expected, bus bandwidth %s GB/s at %d bytes, %s s'
                       % (label, _number(reduced), busbw, size_bytes, seconds))
    return _result('fail', value, '%s: %s' % (label, outcome.replace('_', ' ')), problems, hint)


def _phases(logs):
    return dict((log.rank, log.phase) for log in logs)
