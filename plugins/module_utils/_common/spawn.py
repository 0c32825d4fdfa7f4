# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start a long-running process without waiting for it, and say how a process ended.

The SGLang server (sglang/launch.py) and the NCCL smoke test's ranks (gpu/nccl_smoke.py) both start
processes that must outlive the call that starts them, which AnsibleModule.run_command cannot do.
"""

from __future__ import annotations

import os
import signal

_SIGNAL_NAMES = dict((getattr(signal, n), n) for n in dir(signal) if n.startswith('SIG') and not n.startswith('SIG_'))


class LaunchError(Exception):
    """The server could not be started or stopped at all (not a failed start: that is the log's job)."""


def describe_exit(code=None, sig=None):
    if sig:
        return 'killed by signal %s' % _SIGNAL_NAMES.get(sig, sig)
    return 'exited with status %s' % code


def spawn(argv, env, cwd, log_fd):
    """Fork and exec `argv` as the leader of a new session, output to `log_fd`; returns its PID.

    run_command waits for its command to end, so a server cannot be started through it; this is
    the fork/exec it would do, without the wait. An exec failure comes back through a pipe that
    closes on a successful exec, so a missing binary fails here, not as a silent exit later.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child execs or exits)
        try:
            os.close(read_end)
            os.setsid()
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            os.set_inheritable(1, True)
            os.set_inheritable(2, True)
            os.closerange(3, write_end)
            os.closerange(write_end + 1, 65536)
            os.set_inheritable(write_end, False)
            if cwd:
                os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        except BaseException as exc:  # pylint: disable=broad-except
            os.write(write_end, ('%s' % exc).encode('utf-8', 'replace'))
        finally:
            os._exit(127)
    os.close(write_end)
    chunks = []
    while True:
        data = os.read(read_end, 4096)
        if not data:
            break
        chunks.append(data)
    os.close(read_end)
    if chunks:
        os.waitpid(pid, 0)
        raise LaunchError('cannot run %s: %s' % (argv[0], b''.join(chunks).decode('utf-8', 'replace')))
    return pid
