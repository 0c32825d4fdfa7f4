# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health gate: watch one SGLang start until it serves, or fail at once naming the cause.

Every poll looks at the process (exit), the new log lines (fatal signatures, progress), the stall
timer (before the port opens) and the overall deadline. HTTP probes run in a worker thread,
because `/health_generate` may legitimately take ~21 s and a rank can die meanwhile.
"""

from __future__ import annotations

import threading
import time

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.probe import check_follower, check_ready, port_open
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.signatures import SignatureScanner
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.versions import FOLLOWER_LINE
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.watch import (
    READY_LINE, Deadline, StallTimer, phase_of,
)

# After a fatal line while the process still lives, wait this long for the rest of the traceback.
FATAL_GRACE = 0.5
# Pause between two readiness rounds that did not pass (503 during warmup).
PROBE_BACKOFF = 1.0


class _Worker:
    """One readiness round at a time, off the polling loop."""

    def __init__(self, fn, done=None):
        self.fn = fn
        self.done = done
        self.thread = None
        self.result = None

    def busy(self):
        return self.thread is not None and self.thread.is_alive()

    def start(self, *args):
        self.result = None

        def body():
            try:
                self.result = self.fn(*args)
            except Exception as exc:  # pylint: disable=broad-except
                self.result = (False, 'probe error: %s' % exc, None)
            if self.done is not None:
                self.done()
        self.thread = threading.Thread(target=body)
        self.thread.daemon = True
        self.thread.start()

    def take(self):
        if self.busy() or self.result is None:
            return None
        result, self.result, self.thread = self.result, None, None
        return result


def _clip(line, size=300):
    """One log line in a message: SGLang's ServerArgs line alone runs to thousands of characters."""
    return line if len(line) <= size else line[:size] + ' [cut]'


def _fmt(seconds):
    return '%.1f s' % seconds


class Gate:
    """server: a manager (status()); log: a LogFollower; probe: a sglang_probe.Probe; progress: a ProgressFile."""

    def __init__(self, server, log, probe, progress, host, port, timeout, stall_timeout, poll_interval=0.2,
                 skip_warmup=False, expected_name=None, do_probe=True, ready_line_seen=False, follower_line_seen=False,
                 clock=time.monotonic, sleep=None, is_port_open=port_open):
        self.server = server
        self.log = log
        self.probe = probe
        self.progress = progress
        self.host = host
        self.port = port
        self.deadline = Deadline(timeout, clock)
        self.stall = StallTimer(stall_timeout, clock)
        self.poll_interval = poll_interval
        self.skip_warmup = skip_warmup
        self.expected_name = expected_name
        self.do_probe = do_probe
        self.clock = clock
        # Between polls the gate waits on `wake`, which a finished readiness round sets: the
        # verdict is acted on at once, not up to a poll interval later.
        self.wake = threading.Event()
        self.sleep = sleep or self._wait_for_wake
        self.is_port_open = is_port_open
        self.scanner = SignatureScanner()
        self.phase = 'starting'
        self.ready_line = ready_line_seen
        # A follower's FOLLOWER_LINE (probe.check_follower): False until this start logged it.
        self.follower_line = follower_line_seen
        self.port_open_at = None
        self.fatal_at = None
        self.last_reason = None
        self.next_probe_at = 0.0
        self.probed_with_ready_line = False
        self.worker = _Worker(self._round, done=self.wake.set)

    def _round(self):
        if not self.do_probe:
            return check_follower(self.probe, self.deadline.clamp, self.follower_line)
        return check_ready(self.probe, self.deadline.clamp, self.ready_line, self.skip_warmup, self.expected_name)

    def _wait_for_wake(self, seconds):
        self.wake.wait(seconds)
        self.wake.clear()

    # One poll: returns a result dict when the start is decided, None to keep waiting.
    def step(self):
        lines = self.log.read_new()
        # A tqdm bar's \r redraws grow the log without completing a line: progress all the same.
        if lines or getattr(self.log, 'grew_by', 0):
            self.stall.grew()
        if lines:
            self.scanner.feed(lines)
            if any(READY_LINE in line for line in lines):
                self.ready_line = True
                self.next_probe_at = 0.0
            if not self.do_probe and not self.follower_line and any(FOLLOWER_LINE in line for line in lines):
                self.follower_line = True
                self.next_probe_at = 0.0
        alive, ended = self.server.status()
        if not alive:
            self.scanner.feed(self.log.read_new())
            return self._fail('exited', 'the server %s' % ended if ended.startswith('exited') else 'the server was %s' % ended)
        if self.scanner.fatal:
            if self.fatal_at is None:
                self.fatal_at = self.clock()
            elif self.clock() - self.fatal_at >= FATAL_GRACE:
                return self._fail('fatal', 'the server logged a fatal error while still running')
        if self.port_open_at is None and self.is_port_open(self.host, self.port):
            self.port_open_at = self.deadline.elapsed()
        self.phase = phase_of(self.phase, lines, self.port_open_at is not None)
        if self.port_open_at is None and self.stall.stalled():
            return self._fail('stalled', 'no new log line for %s while the port %d is still closed'
                              % (_fmt(self.stall.quiet_for()), self.port))
        decided = self._probe()
        if decided:
            return decided
        if self.deadline.expired():
            return self._fail('timeout', 'not ready%s' % (
                ' (last check: %s)' % self.last_reason if self.last_reason else ''))
        self.progress.update('running', self.phase, self.deadline.elapsed(), self.log.last_line)
        return None

    def _probe(self):
        if self.port_open_at is None:
            return None
        outcome = self.worker.take()
        if outcome is not None:
            ready, reason, permanent = outcome
            if ready:
                return self._succeed()
            self.last_reason = reason
            if permanent:
                return self._fail(permanent, reason)
            # The ready line arrived during that round: check again now, not after the backoff.
            self.next_probe_at = 0.0 if self.ready_line != self.probed_with_ready_line else self.clock() + PROBE_BACKOFF
        if not self.worker.busy() and self.clock() >= self.next_probe_at:
            self.probed_with_ready_line = self.ready_line
            self.worker.start()
        return None

    def run(self):
        while True:
            result = self.step()
            if result is not None:
                return result
            self.sleep(min(self.poll_interval, max(0.01, self.deadline.remaining())))

    def _base(self):
        return {'phase': self.phase, 'startup_seconds': round(self.deadline.elapsed(), 2),
                'port_open_seconds': round(self.port_open_at, 2) if self.port_open_at is not None else None,
                'log_tail': list(self.log.tail)}

    def _succeed(self):
        self.phase = 'ready'
        result = self._base()
        result.update(ready=True, cause=None, fix=None, sample=self.probe.sample,
                      served_model_name=self.probe.served_model_name, model_info=self.probe.model_info)
        self.progress.update('ready', 'ready', self.deadline.elapsed(), self.log.last_line, force=True)
        return result

    def _fail(self, kind, what):
        verdict = self.scanner.verdict()
        result = self._base()
        where = '%s after %s in phase %s' % (what, _fmt(self.deadline.elapsed()), self.phase)
        if verdict:
            cause, fix = verdict['cause'], verdict['fix']
            detail = ' (%s)' % ', '.join('%s %s' % kv for kv in sorted(verdict['detail'].items())) if verdict['detail'] else ''
            msg = '%s: %s%s. Log line: %s' % (where, verdict['summary'], detail, _clip(verdict['line']))
        else:
            cause, fix = _OTHER_CAUSES.get(kind, _OTHER_CAUSES['unknown'])
            msg = where
            hints = sorted(self.scanner.hints)
            if hints:
                msg += ' (the log also has: %s)' % ', '.join(hints)
        msg = '%s. Fix: %s.' % (msg.rstrip('.'), fix)
        self.progress.update('failed', self.phase, self.deadline.elapsed(), self.log.last_line, force=True, cause=cause)
        result.update(ready=False, cause=cause, fix=fix, msg=msg)
        return result


# Causes that come from the watch itself, not from a log signature: (cause, fix).
_OTHER_CAUSES = {
    'stalled': ('stalled', 'a hung NCCL init or weight load prints nothing: check P2P/ACS/IOMMU with gpu_health, '
                           'retry with NCCL_P2P_DISABLE=1 as a diagnostic, NCCL_DEBUG=INFO for detail; raise '
                           'stall_timeout only if loading is just slow and silent'),
    'timeout': ('timeout', 'read the log tail; raise timeout only if this model needs longer to load '
                           '(SGLang allows 3000 s on Blackwell)'),
    'served_model_name': ('served_model_name', 'make --served-model-name and the expected name agree'),
    'no_tokens': ('no_tokens', 'the model answers but generates nothing: check that the model path holds a complete '
                               'checkpoint and its generation config (an EOS at once, max_new_tokens 0); try the '
                               'prompt by hand with POST /generate'),
    'unknown': ('unknown', 'no known signature matched: read the log tail'),
}
