# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deadline and stall arithmetic, the log follower, phases and the progress file."""

from __future__ import annotations

import json
import os

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.watch import (
    Deadline, LogFollower, ProgressFile, StallTimer, find_last_start, phase_of,
)


class Clock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


def test_deadline_clamps_every_probe_to_what_remains():
    clock = Clock()
    deadline = Deadline(30, clock)
    assert deadline.clamp(25) == 25
    clock.now += 20
    assert deadline.remaining() == 10 and deadline.clamp(25) == 10 and not deadline.expired()
    clock.now += 10
    assert deadline.expired() and deadline.clamp(25) == 0.05  # never a zero/negative socket timeout


def test_stall_timer_counts_from_the_last_growth():
    clock = Clock()
    stall = StallTimer(5, clock)
    clock.now += 4.9
    assert not stall.stalled()
    stall.grew()
    clock.now += 4.9
    assert not stall.stalled()
    clock.now += 0.1
    assert stall.stalled() and stall.quiet_for() == 5.0


def test_follower_reads_complete_lines_from_where_the_start_began(tmp_path):
    log = tmp_path / 'server.log'
    log.write_text('old run line\n')
    follower = LogFollower(str(log))
    assert follower.read_new() == []
    with open(str(log), 'a') as handle:
        handle.write('\x1b[32mfirst\x1b[0m\nsecond without newline')
    assert follower.read_new() == ['first']
    with open(str(log), 'a') as handle:
        handle.write(' yet\n')
    assert follower.read_new() == ['second without newline yet']
    assert follower.last_line == 'second without newline yet'


def test_follower_restarts_after_copytruncate_and_replacement(tmp_path):
    log = tmp_path / 'server.log'
    log.write_text('a\nb\n')
    follower = LogFollower(str(log), offset=0)
    assert follower.read_new() == ['a', 'b']
    log.write_text('c\n')  # truncated then written: shorter than the offset
    assert follower.read_new() == ['c']
    os.rename(str(log), str(tmp_path / 'server.log.1'))
    log.write_text('d\n')
    assert follower.read_new() == ['d']


def test_follower_keeps_the_last_redraw_of_a_progress_bar_and_masks_secrets(tmp_path):
    log = tmp_path / 'server.log'
    log.write_text('')
    follower = LogFollower(str(log), tail_lines=2, secrets=['k3y'])
    with open(str(log), 'a') as handle:
        handle.write('Loading: 10%\rLoading: 50%\rLoading: 100%\n')
        handle.write("server_args=ServerArgs(api_key='k3y')\nkey k3y\n")
    assert follower.read_new() == ['Loading: 100%', "server_args=ServerArgs(api_key='********')", 'key ********']
    assert list(follower.tail) == ["server_args=ServerArgs(api_key='********')", 'key ********']


def test_find_last_start_finds_the_last_start_across_chunks(tmp_path):
    log = tmp_path / 'server.log'
    first = "x server_args=ServerArgs(a)\n" + 'filler\n' * 50
    second = "y server_args=ServerArgs(b)\nready\n"
    log.write_text(first + second)
    assert find_last_start(str(log), chunk=16) == len(first)
    # Absent and at byte 0 are told apart: a log rotated since the start holds no marker at all.
    assert find_last_start(str(tmp_path / 'missing.log')) is None
    log.write_text(second)
    assert find_last_start(str(log)) == 0
    log.write_text('after a copytruncate rotation\n')
    assert find_last_start(str(log)) is None


def test_find_last_start_knows_the_marker_of_every_release(tmp_path):
    # sglang 0.5.9 logs f"{server_args=}" (the dataclass repr), 0.5.23 a dict of the resolved values.
    log = tmp_path / 'server.log'
    old = "[2026-12-04 10:00:00] server_args=ServerArgs(model_path='/m', api_key=None)\n" + 'old start line\n' * 40
    new = "[2026-12-04 11:00:00] server_args={'model_path': '/m', 'api_key': None}\nnew start line\n"
    log.write_text(old + new)
    for chunk in (7, 16, 1 << 20):  # the marker across every chunk boundary
        assert find_last_start(str(log), chunk=chunk) == len(old), chunk
    log.write_text(new + 'x\n' * 40 + old)
    assert find_last_start(str(log), chunk=16) == len(new) + 80


def test_a_progress_bar_without_a_newline_is_growth(tmp_path):
    # tqdm's capture bar redraws with \r and ends its line only when the capture is done.
    log = tmp_path / 'server.log'
    log.write_text('')
    follower = LogFollower(str(log), offset=0)
    with open(str(log), 'a') as handle:
        handle.write('Capturing batches (bs=128 avail_mem=12.00 GB):   2%|')
    assert follower.read_new() == [] and follower.grew_by > 0
    assert follower.read_new() == [] and follower.grew_by == 0


def test_the_tail_keeps_the_servers_lines_not_the_gates_access_lines(tmp_path):
    # The gate probes once a second while a start warms up; its access lines would push the
    # server's own last lines out of the tail shown on failure.
    log = tmp_path / 'server.log'
    log.write_text('')
    follower = LogFollower(str(log), offset=0, tail_lines=3)
    lines = ['[2026-12-04 10:00:00] Load weight end.', 'Traceback (most recent call last):',
             'RuntimeError: the reason']
    access = ['[2026-12-04 10:00:0%d] INFO:     127.0.0.1:4%d - "GET /health_generate HTTP/1.1" 503 Service Unavailable'
              % (n, n) for n in range(5)]
    access.append('[2026-12-04 10:00:06] INFO:     127.0.0.1:49 - "POST /generate HTTP/1.1" 200 OK')
    with open(str(log), 'a') as handle:
        handle.write('\n'.join(lines[:2] + access[:3] + lines[2:] + access[3:]) + '\n')
    read = follower.read_new()
    assert len(read) == len(lines) + len(access)  # every line still reaches the signatures and the stall timer
    assert list(follower.tail) == lines and follower.last_line == 'RuntimeError: the reason'


def test_phases_only_move_forward():
    assert phase_of('starting', ['[2026] server_args=ServerArgs(...)']) == 'process_up'
    assert phase_of('process_up', ['Load weight begin. avail mem=93 GB']) == 'loading'
    assert phase_of('loading', ['some later line']) == 'loading'
    assert phase_of('loading', [], port_open=True) == 'warmup'
    assert phase_of('warmup', ['Load weight begin']) == 'warmup'


def test_progress_file_is_throttled_but_phase_changes_are_written_at_once(tmp_path):
    clock = Clock()
    path = str(tmp_path / 'progress.json')
    progress = ProgressFile(path, every=1.0, clock=clock, wall=lambda: 42.0)
    assert progress.update('running', 'loading', 1.0, 'line 1')
    clock.now += 0.5
    assert not progress.update('running', 'loading', 1.5, 'line 2')
    assert progress.update('running', 'warmup', 1.5, 'line 3')
    data = json.load(open(path))
    assert data == {'state': 'running', 'phase': 'warmup', 'elapsed': 1.5, 'last_line': 'line 3', 'updated': 42.0}
    assert oct(os.stat(path).st_mode & 0o777) == '0o640'
    assert os.listdir(str(tmp_path)) == ['progress.json']


def test_each_progress_record_names_the_revision_of_its_start(tmp_path):
    """The role's wait ends on a ready or failed record of its own start only (roles/sglang_server/tasks/wait.yml):
    the file an earlier start left needs no task to remove it."""
    import re
    path = str(tmp_path / 'progress.json')
    ProgressFile(path, wall=lambda: 1.0, revision='0ld').update('ready', 'ready', 9.0, 'ready line', force=True)
    wait_regex = r'"state":\s*"(ready|failed)".*"revision":\s*"%s"'
    text = open(path).read()
    assert re.search(wait_regex % '0ld', text) and not re.search(wait_regex % 'n3w', text)
    progress = ProgressFile(path, wall=lambda: 2.0, revision='n3w')
    progress.update('running', 'loading', 0.1, 'x "revision": "n3w" in a log line')
    assert not re.search(wait_regex % 'n3w', open(path).read())
    progress.update('failed', 'loading', 3.0, 'boom', force=True, cause='oom')
    data = json.load(open(path))
    assert data['revision'] == 'n3w' and data['cause'] == 'oom' and re.search(wait_regex % 'n3w', open(path).read())
    # The regex of the role is this one.
    wait = open(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'sglang_server', 'tasks',
                             'wait.yml')).read()
    assert """search_regex: '"state":\\s*"(ready|failed)".*"revision":\\s*"{{ __sglang_server_revision }}"'""" in wait
