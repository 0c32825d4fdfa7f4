# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A deadline for every external command a module runs.

``AnsibleModule.run_command`` has no timeout, and modules may not start processes any other way
(ansible-test's sanity rules), so the command runs under coreutils' timeout(1). timeout makes
itself the leader of a new process group and signals the whole group, so helpers the command
started die with it; the grace period after SIGTERM ends in SIGKILL. A process stuck in the
kernel (uninterruptible sleep, as nvidia-smi can be on a GPU that fell off the bus) cannot be
killed by anyone; the task-level ``timeout`` keyword is the last resort there.
"""

from __future__ import annotations

import time

# Exit statuses of timeout(1): 124 after SIGTERM, 128+9 when SIGKILL was needed.
_TIMED_OUT = (124, 137)
GRACE_SECONDS = 5


class CommandTimeout(Exception):
    """A command ran past its limit and was killed."""

    def __init__(self, argv, seconds, option):
        self.argv = list(argv)
        self.seconds = seconds
        self.option = option
        super(CommandTimeout, self).__init__(
            '`%s` did not finish within %s s and was killed (limit: the module option %s)'
            % (' '.join(self.argv), format_seconds(seconds), option))


def format_seconds(seconds):
    return ('%d' % seconds) if float(seconds).is_integer() else ('%g' % seconds)


class BoundedRunner:
    """Stands in for run_command: same call, same (rc, stdout, stderr), raises CommandTimeout.

    run_command: AnsibleModule.run_command or a stand-in. timeout_binary: the path of timeout(1).
    seconds: the default limit of one command; a call can pass its own ``timeout``.
    """

    def __init__(self, run_command, timeout_binary, seconds, option='command_timeout', clock=time.monotonic):
        if not timeout_binary:
            raise ValueError('timeout(1) from coreutils is needed to bound the commands this module runs; '
                             'it was not found on the target')
        # timeout(1) reads 0 as "no limit".
        if seconds <= 0:
            raise ValueError('%s must be at least 1 second (got %s)' % (option, seconds))
        self.run_command = run_command
        self.timeout_binary = timeout_binary
        self.seconds = seconds
        self.option = option
        self.clock = clock

    def __call__(self, argv, timeout=None, **kwargs):
        seconds = timeout or self.seconds
        wrapped = [self.timeout_binary, '--kill-after=%ds' % GRACE_SECONDS, '%ss' % format_seconds(seconds)]
        started = self.clock()
        rc, out, err = self.run_command(wrapped + list(argv), **kwargs)
        # A command may exit 124 by itself: only a run that lasted its limit timed out.
        if rc in _TIMED_OUT and self.clock() - started >= seconds:
            raise CommandTimeout(argv, seconds, self.option)
        return rc, out, err


def module_runner(module, seconds, environ_update=None, option='command_timeout'):
    """A BoundedRunner over ``module.run_command``; a missing timeout(1) fails the module."""

    def run_command(argv, **kwargs):
        if environ_update:
            kwargs.setdefault('environ_update', environ_update)
        return module.run_command(argv, **kwargs)

    try:
        return BoundedRunner(run_command, module.get_bin_path('timeout'), seconds, option=option)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
