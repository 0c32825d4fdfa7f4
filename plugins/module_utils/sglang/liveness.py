# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Liveness after ready: restart an SGLang unit whose engine hangs once it served.

A scheduler stuck in NCCL or the driver leaves the HTTP process up (/ping 200, the port open), so
systemd sees a running unit and Restart=on-failure never fires; only a generation shows the hang:
/health_generate answers 503 after SGLANG_HEALTH_CHECK_TIMEOUT, or nothing. A systemd timer runs this
file (installed by the sglang_server role as a script; standard library only, no Ansible) once per
interval: one probe per run, the count of failures in a row kept in a JSON state file under
/run/inferops (tmpfs: a reboot forgets it, as it should).

Failures count only once this invocation of the unit (its InvocationID) was ready: a start takes
minutes of 503s that are no hang, and the role's health gate judges a start. Ready means the gate
passed this invocation (the sglang_server module's record, --ready-file, names it), or, for a start
the gate did not watch (a restart by systemd or by this script), this script's own probe once saw
200. So a hang right after the gate's pass, before this script's first probe, is counted too. A
unit that is not active is not probed and its count is reset.

The probe's timeout must cover SGLang's own health check (/health_generate answers 503 after
SGLANG_HEALTH_CHECK_TIMEOUT, 20 s, when the scheduler does not answer): a slower answer is a busy
server, not a hang, so the role's default is the gate's 25 s.

    sglang-liveness --unit sglang-server.service --url http://127.0.0.1:30000/health_generate \\
        --failures 3 --timeout 25 [--ready-file /var/log/sglang/ready.json] [--state-dir /run/inferops] \\
        [--grace 0] [--command-timeout 30]

The transport, the clock, systemctl and the log are injected (Liveness), so the state machine is
tested without a server or systemd.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from urllib.parse import urlsplit

PREFIX = 'sglang liveness: '
STATE_DIR = '/run/inferops'
DESCRIPTION = 'Restart a systemd unit running SGLang after N failed /health_generate probes in a row.'
SHOWN = ('ActiveState', 'SubState', 'InvocationID', 'ActiveEnterTimestampMonotonic')


class CommandFailed(Exception):
    pass


# -- transport, systemctl, state file (the real side of the injected parts) --------------------------

def http_probe(url, timeout):
    """(ok, cause) of one GET: ok on 200; cause names the status, a timeout or a refused connection."""
    # http.client, not urllib.request: no proxy from the environment can answer for the local
    # server, and a run every interval on every node does not import ssl, email and the URL openers.
    parts = urlsplit(url)
    if parts.scheme != 'http' or not parts.hostname:
        return False, 'error: not an http:// URL: %s' % url
    connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    try:
        connection.request('GET', (parts.path or '/') + ('?' + parts.query if parts.query else ''))
        status = connection.getresponse().status
    except (socket.timeout, TimeoutError):
        return False, 'timeout after %s s' % _number(timeout)
    except ConnectionRefusedError:
        return False, 'connection refused'
    except (OSError, ValueError, http.client.HTTPException) as exc:
        # a reset or a half answer while the engine is wedged
        return False, 'error: %s' % (exc,)
    finally:
        connection.close()
    if status == 200:
        return True, 'status 200'
    return False, 'status %d' % status


def _number(value):
    return ('%g' % value) if isinstance(value, float) else str(value)


def invocation_key(props):
    """Which run of the unit this is; the sglang_server module names the run that passed its gate the same way."""
    return props.get('InvocationID') or 'active-since:%s' % props.get('ActiveEnterTimestampMonotonic', '')


def read_ready(path):
    """The identity the health gate's last pass recorded (the module's ready.json), or ''."""
    if not path:
        return ''
    try:
        with open(path) as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return ''
    return str(record.get('identity') or '') if isinstance(record, dict) else ''


def run_command(argv, timeout):
    """stdout of argv; CommandFailed naming the command on a non-zero exit, a timeout or a missing program."""
    # A script run by a timer, not a module: there is no AnsibleModule.run_command here.
    try:
        # pylint: disable-next=ansible-bad-function
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                              universal_newlines=True, check=False)
    except subprocess.TimeoutExpired:
        raise CommandFailed('%s: no answer in %s s' % (' '.join(argv), _number(timeout)))
    except OSError as exc:
        raise CommandFailed('%s: %s' % (' '.join(argv), exc))
    if done.returncode != 0:
        raise CommandFailed('%s: exit %d: %s' % (' '.join(argv), done.returncode, done.stderr.strip()))
    return done.stdout


def parse_show(text):
    """systemctl show's Key=Value lines as a dict."""
    props = {}
    for line in text.splitlines():
        key, sep, value = line.partition('=')
        if sep:
            props[key] = value
    return props


def systemctl_show(unit, timeout, run=run_command):
    argv = ['systemctl', 'show']
    for prop in SHOWN:
        argv += ['-p', prop]
    return parse_show(run(argv + ['--', unit], timeout))


def systemctl_restart(unit, timeout, run=run_command):
    # --no-block: the stop of a wedged engine can take its whole TimeoutStopSec; the timer's next
    # run sees the unit deactivating or activating and skips.
    run(['systemctl', 'restart', '--no-block', '--', unit], timeout)


def state_path(state_dir, unit):
    return os.path.join(state_dir, 'sglang-liveness-%s.json' % unit)


def load_state(path):
    try:
        with open(path) as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def save_state(path, state):
    """Write in one rename: a run killed mid-write leaves the old state, never half a file.

    Not atomic_file.py: this file is installed alone as the timer's script and imports nothing of the collection."""
    directory = os.path.dirname(path) or '.'
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    handle, temp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(handle, 'w') as out:
            json.dump(state, out, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)
        os.rename(temp, path)
    except BaseException:
        if os.path.lexists(temp):
            os.remove(temp)
        raise


# -- the state machine -----------------------------------------------------------------------------

class Liveness:
    """One run: read the unit, probe once, count, restart at `failures` in a row.

    show(unit) -> {ActiveState, InvocationID, ActiveEnterTimestampMonotonic (µs), ...};
    probe(url, timeout) -> (ok, cause); restart(unit); clock() -> CLOCK_MONOTONIC seconds (systemd's
    clock for ActiveEnterTimestampMonotonic); load() -> state dict; save(state); log(line).
    """

    def __init__(self, unit, url, failures, timeout, show, probe, restart, load, save, log,
                 clock=time.monotonic, grace=0.0, warn=None, gate_passed=lambda: ''):
        self.unit = unit
        self.url = url
        self.failures = failures
        self.timeout = timeout
        self.grace = grace
        self.show = show
        self.probe = probe
        self.restart = restart
        self.load = load
        self.save = save
        self.log = log
        # Failed probes and restarts: what an operator looks for (a warning in the journal).
        self.warn = warn or log
        self.clock = clock
        # () -> the identity of the run the health gate last passed ('' for none).
        self.gate_passed = gate_passed

    def run(self):
        """What this run did: inactive, starting, armed, ready, ok, not_ready, failed or restarted."""
        props = self.show(self.unit)
        if props.get('ActiveState') != 'active':
            self.save({})
            return 'inactive'
        try:
            entered = int(props.get('ActiveEnterTimestampMonotonic') or 0) / 1e6
        except ValueError:
            entered = 0.0
        # systemd older than 232 has no InvocationID: the time the unit became active tells
        # one invocation from the next as well.
        key = invocation_key(props)
        state = self.load()
        if state.get('invocation') != key:
            state = {'invocation': key, 'ready_seen': False, 'failures': 0}
        armed_now = False
        if not state.get('ready_seen') and self.gate_passed() == key:
            # The gate's pass arms the count: a hang before this script's first probe is a hang too.
            state['ready_seen'] = armed_now = True
            self.log('%s%s passed its health gate (invocation %s): armed, it is restarted after %d failed '
                     '/health_generate probes in a row' % (PREFIX, self.unit, key, self.failures))
        if not entered or self.clock() - entered < self.grace:
            self.save(state)
            return 'armed' if armed_now else 'starting'
        ok, cause = self.probe(self.url, self.timeout)
        if ok:
            outcome = 'ok' if state.get('ready_seen') else 'ready'
            if outcome == 'ready':
                self.log('%s%s answered 200 (invocation %s): armed, it is restarted after %d failed '
                         '/health_generate probes in a row' % (PREFIX, self.unit, key, self.failures))
            elif state.get('failures'):
                self.log('%sprobe answered 200 after %d failure(s): count reset' % (PREFIX, state['failures']))
            state.update(ready_seen=True, failures=0, last_cause='')
            self.save(state)
            return outcome
        if not state.get('ready_seen'):
            # still loading (or it never came up: the role's health gate judges a start, not this)
            self.save(state)
            return 'not_ready'
        count = int(state.get('failures') or 0) + 1
        self.warn('%sprobe %d/%d failed: %s' % (PREFIX, count, self.failures, cause))
        if count < self.failures:
            state.update(failures=count, last_cause=cause)
            self.save(state)
            return 'failed'
        self.warn('%srestarting %s after %d failed /health_generate probes in a row (last: %s)'
                  % (PREFIX, self.unit, count, cause))
        # Reset first: a restart that fails is not asked for again on every later run at once;
        # the count has to fill up again.
        state.update(failures=0, last_cause=cause)
        self.save(state)
        self.restart(self.unit)
        return 'restarted'


# -- the script ------------------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(prog='sglang-liveness', description=DESCRIPTION)
    parser.add_argument('--unit', required=True, help='the server unit, such as sglang-server.service')
    parser.add_argument('--url', required=True, help='the /health_generate URL to probe')
    parser.add_argument('--failures', type=int, default=3, help='failed probes in a row before a restart')
    parser.add_argument('--timeout', type=float, default=25.0,
                        help="seconds one probe may take (over SGLang's own 20 s health check)")
    parser.add_argument('--state-dir', default=STATE_DIR, help='where the JSON state file lives')
    parser.add_argument('--ready-file', default='', help="the sglang_server module's record of the run that passed "
                                                         'its health gate (ready.json): that run counts from the pass on')
    parser.add_argument('--grace', type=float, default=0.0, help='seconds after the unit became active without probing')
    parser.add_argument('--journal', action='store_true', help='prefix lines with syslog priorities (notice, warning)')
    parser.add_argument('--command-timeout', type=float, default=30.0, help='seconds each systemctl call may take')
    args = parser.parse_args(argv)
    if args.failures < 1 or args.timeout <= 0 or args.grace < 0 or args.command_timeout <= 0:
        parser.error('--failures must be at least 1, --timeout and --command-timeout above 0, --grace at least 0')
    return args


def main(argv=None, out=None):
    """The timer's oneshot: exit 0 after a run (whatever the server did), 1 when systemctl or the state file failed."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    path = state_path(args.state_dir, args.unit)

    def writer(priority):
        # --journal: a syslog priority prefix the journal reads (the unit keeps LogLevelMax=notice, so
        # a run that finds the server well writes nothing, not even systemd's own start lines).
        prefix = '<%d>' % priority if args.journal else ''

        def write(line):
            out.write(prefix + line + '\n')
            out.flush()  # the journal gets each line as it happens
        return write

    log, warn = writer(5), writer(4)

    liveness = Liveness(
        args.unit, args.url, args.failures, args.timeout,
        show=lambda unit: systemctl_show(unit, args.command_timeout),
        probe=http_probe,
        restart=lambda unit: systemctl_restart(unit, args.command_timeout),
        load=lambda: load_state(path), save=lambda state: save_state(path, state), log=log, grace=args.grace,
        warn=warn, gate_passed=lambda: read_ready(args.ready_file))
    try:
        liveness.run()
    except (CommandFailed, OSError) as exc:
        warn('%s%s: %s' % (PREFIX, args.unit, exc))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())  # pylint: disable=ansible-bad-function
