# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang servers the collection does not run, found in /proc (issue 42).

A host upgraded by hand serves from a venv in a home directory, started with ``nohup`` on the port
and GPUs the collection wants. ``find`` lists every SGLang server tree (``-m sglang.launch_server``,
``sglang serve``) that is neither in the collection's unit's cgroup nor the process manager's
(its PIDs): its PID, command line (secrets masked), interpreter and the venv it belongs to, working
directory, log (where its stdout goes) and whether it holds the collection's port or a GPU.
``judge`` refuses one that holds the port or a GPU (the collection's server could not start);
another is a warning. With inferops_adopt, ``stop`` ends such a server inside the collection's
switch, right before its unit starts: SIGTERM to the server's main process (SGLang drains the
requests in flight, then ends its ranks), SIGKILL to what is left of its tree after the drain limit.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import time

from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.launch import wait_gone

_SECRET_OPTION = re.compile(r'(key|token|secret|password)', re.IGNORECASE)


def is_server(argv):
    """Whether a command line (its words) runs an SGLang server: `-m sglang.launch_server`, or `sglang serve`."""
    words = [os.path.basename(word) if index < 2 else word for index, word in enumerate(argv)]
    for index, word in enumerate(words):
        if word == '-msglang.launch_server' or (word == '-m' and words[index + 1:index + 2] == ['sglang.launch_server']):
            return True
    return any(word == 'sglang' and words[index + 1:index + 2] == ['serve'] for index, word in enumerate(words[:2]))


def mask(argv):
    """The command line with the value of every option named like a secret replaced by ***."""
    masked, hide = [], False
    for word in argv:
        if hide:
            masked.append('***')
            hide = False
        elif word.startswith('-') and '=' in word and _SECRET_OPTION.search(word.split('=', 1)[0]):
            masked.append(word.split('=', 1)[0] + '=***')
        else:
            masked.append(word)
            hide = word.startswith('-') and bool(_SECRET_OPTION.search(word))
    return ' '.join(masked)


def _argv(pid, proc):
    try:
        with open(os.path.join(proc, str(pid), 'cmdline'), 'rb') as handle:
            raw = handle.read()
    except OSError:
        return []
    return [word.decode('utf-8', 'replace') for word in raw.rstrip(b'\0').split(b'\0') if word]


def _link(path):
    try:
        return os.readlink(path)
    except OSError:
        return ''


def _in_unit(pid, unit, proc):
    try:
        with open(os.path.join(proc, str(pid), 'cgroup')) as handle:
            return any(line.rstrip('\n').endswith('/' + unit) for line in handle)
    except OSError:
        return False


def venv_of(executable, isfile=os.path.isfile):
    """The venv an interpreter belongs to (the directory with its pyvenv.cfg), '' for none."""
    bin_dir = os.path.dirname(executable)
    for candidate in (os.path.dirname(bin_dir), bin_dir):
        if candidate and isfile(os.path.join(candidate, 'pyvenv.cfg')):
            return candidate
    return ''


def find(port, unit, own_pids=(), gpu_pids=(), proc=procfs.PROC, isfile=os.path.isfile):
    """[{pid, cmdline, python, venv, cwd, log, port, gpus}] of the SGLang server trees the collection does not run."""
    table = procfs.process_table(proc)
    servers = [pid for pid in sorted(table) if is_server(_argv(pid, proc))]
    own = set()
    for pid in own_pids:
        own.update(procfs.tree(table, int(pid)))
    holders = set(entry['pid'] for entry in procfs.listeners(port, proc=proc) if entry.get('pid')) if port else set()
    found = []
    for pid in servers:
        if table[pid].ppid in servers or pid in own or _in_unit(pid, unit, proc):
            continue  # a rank of a server already listed, or the collection's own
        members = set(procfs.tree(table, pid))
        argv = _argv(pid, proc)
        # As invoked: a venv's bin/python is a symlink that /proc/PID/exe shows resolved, outside the venv.
        python = argv[0] if argv and argv[0].startswith('/') else _link(os.path.join(proc, str(pid), 'exe'))
        found.append({'pid': pid, 'start': table[pid].starttime, 'pids': sorted(members),
                      'cmdline': mask(argv), 'python': python, 'venv': venv_of(python, isfile),
                      'cwd': _link(os.path.join(proc, str(pid), 'cwd')),
                      'log': _link(os.path.join(proc, str(pid), 'fd', '1')),
                      'port': bool(members & holders), 'gpus': sorted(members & set(gpu_pids))})
    return found


def judge(servers, port, adopt=False):
    """(problems, warnings), one line each; adopt: each server that holds the port or a GPU is to be stopped inside the
    switch (a warning saying so), not refused."""
    problems, warnings = [], []
    for server in servers:
        holds = ([('port %s' % port)] if server['port'] else []) + (['the GPUs (PID %s)' % ', '.join(
            str(pid) for pid in server['gpus'])] if server['gpus'] else [])
        text = ('an SGLang server the collection does not run: PID %s (%s), from %s, working directory %s, log %s'
                % (server['pid'], server['cmdline'], server['venv'] or server['python'] or 'an unknown interpreter',
                   server['cwd'] or '?', server['log'] or '?'))
        if holds and adopt:
            warnings.append('%s, holding %s: adopted, it is stopped (SIGTERM, its drain) right before the collection\'s '
                            'server starts' % (text, ' and '.join(holds)))
        elif holds:
            problems.append('%s, holding %s: the collection\'s server cannot start beside it; stop it (kill -TERM %s: '
                            'its drain finishes the requests in flight) before the run'
                            % (text, ' and '.join(holds), server['pid']))
        else:
            warnings.append(text)
    return problems, warnings


def stop(servers, timeout, proc=procfs.PROC, kill=os.kill, clock=time.monotonic, sleep=time.sleep):
    """Stop each server ({pid, start} from find) as a unit's stop would: SIGTERM to its main process, whose drain ends
    its ranks, SIGKILL to its tree after `timeout` s. A PID that no longer has the recorded start time is another
    process (the server ended and the PID was reused): it is left alone. Returns (stopped pids, survivors)."""
    stopped, survivors = [], []
    for server in servers:
        info = procfs.read_proc(int(server['pid']), proc)
        if info is None or info.starttime != int(server['start']):
            continue
        members = procfs.tree(procfs.process_table(proc), info.pid)
        _signal(kill, [info.pid], signal.SIGTERM)

        def alive(pid):
            return procfs.alive(pid, proc)
        left = wait_gone(members, alive, timeout, clock, sleep)
        if left:
            _signal(kill, left, signal.SIGKILL)
            left = wait_gone(left, alive, 10, clock, sleep)
        stopped.extend(members)
        survivors.extend(left)
    return stopped, survivors


def _signal(kill, pids, sig):
    for pid in pids:
        try:
            kill(pid, sig)
        except OSError as exc:
            if exc.errno not in (errno.ESRCH, errno.EPERM):
                raise
