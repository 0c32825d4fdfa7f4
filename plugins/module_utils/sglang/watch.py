# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Clocks, the log follower and the progress file of a watched SGLang start.

All time is monotonic and injected: a wall-clock step (NTP) must neither end a start early nor
stretch it, and the unit tests drive the clock by hand.
"""

from __future__ import annotations

import collections
import json
import os
import re
import time

from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import replace_text
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.signatures import redact, strip_ansi
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.versions import READY_LINE, START_MARKERS

# uvicorn's access lines of the readiness probe's own requests (one a second while the gate waits):
# kept out of the tail shown on failure, where they would push out the server's own last lines.
OWN_REQUEST = re.compile(r'"(?:GET|POST) /(?:health_generate|health|generate|v1/models|model_info) HTTP/[0-9.]+" [0-9]{3}\b')

# Phases in the order a start reaches them; `phase_of` only moves forward.
PHASES = ('starting', 'process_up', 'loading', 'port_open', 'warmup', 'ready')
_LOADING_MARKERS = ('Load weight begin', 'Loading safetensors', 'Init torch distributed', 'Capture cuda graph',
                    'KV Cache is allocated', 'Memory pool end')


class Deadline:
    """Seconds left of an overall budget; every probe's timeout is clamped to what remains."""

    def __init__(self, seconds, clock=time.monotonic):
        self.clock = clock
        self.seconds = seconds
        self.start = clock()

    def elapsed(self):
        return self.clock() - self.start

    def remaining(self):
        return max(0.0, self.seconds - self.elapsed())

    def expired(self):
        return self.remaining() <= 0

    def clamp(self, seconds, floor=0.05):
        """`seconds`, but never past the deadline (and never below a usable floor)."""
        return max(floor, min(seconds, self.remaining()))


class StallTimer:
    """Time since the log last grew: a hung NCCL init or weight load prints nothing and never exits."""

    def __init__(self, seconds, clock=time.monotonic):
        self.seconds = seconds
        self.clock = clock
        self.last_growth = clock()

    def grew(self):
        self.last_growth = self.clock()

    def quiet_for(self):
        return self.clock() - self.last_growth

    def stalled(self):
        return self.quiet_for() >= self.seconds


def find_last_start(path, markers=START_MARKERS, chunk=1 << 20):
    """Byte offset of the line holding the last of any of `markers` in the file (each release prints
    its own: sglang_versions.START_MARKERS); None when there is none, or the file is unreadable."""
    try:
        handle = open(path, 'rb')
    except (IOError, OSError):
        return None
    needles = [marker.encode() for marker in markers]
    longest = max(len(needle) for needle in needles)
    with handle:
        handle.seek(0, os.SEEK_END)
        end = handle.tell()
        pos = end
        tail = b''
        # Backwards in chunks: logs are rotated, but a week of restarts is still megabytes.
        while pos > 0:
            step = min(chunk, pos)
            pos -= step
            handle.seek(pos)
            data = handle.read(step) + tail
            found = max(data.rfind(needle) for needle in needles)
            if found >= 0:
                return _line_start(handle, pos + found, chunk)
            # A marker across the chunk boundary: the next (earlier) chunk is read with these bytes.
            tail = data[:longest]
    return None


def _line_start(handle, offset, chunk):
    """Offset of the first byte of the line holding `offset`."""
    while offset > 0:
        step = min(chunk, offset)
        handle.seek(offset - step)
        data = handle.read(step)
        newline = data.rfind(b'\n')
        if newline >= 0:
            return offset - step + newline + 1
        offset -= step
    return 0


class LogFollower:
    """New complete lines of a log file since the last read, ANSI-stripped; `tail` keeps the server's
    own last lines (not the access lines of the probe's requests).

    A file that shrank (copytruncate rotation) or was replaced (new inode) is read from its start.
    """

    def __init__(self, path, offset=None, tail_lines=30, secrets=()):
        self.path = path
        self.secrets = [s for s in secrets if s]
        self.tail = collections.deque(maxlen=tail_lines)
        self.partial = b''
        self.inode = None
        # Bytes the last read_new took: a tqdm bar grows the log by \r redraws with no newline for
        # minutes (CUDA graph capture), which is progress although no line completes.
        self.grew_by = 0
        self.offset = offset if offset is not None else self._size()
        self.inode = self._inode()

    def _stat(self):
        try:
            return os.stat(self.path)
        except OSError:
            return None

    def _size(self):
        st = self._stat()
        return st.st_size if st else 0

    def _inode(self):
        st = self._stat()
        return st.st_ino if st else None

    def read_new(self, limit=4 << 20):
        self.grew_by = 0
        st = self._stat()
        if st is None:
            return []
        if st.st_ino != self.inode or st.st_size < self.offset:
            self.inode, self.offset, self.partial = st.st_ino, 0, b''
        if st.st_size == self.offset:
            return []
        with open(self.path, 'rb') as handle:
            handle.seek(self.offset)
            data = handle.read(limit)
        self.offset += len(data)
        self.grew_by = len(data)
        data = self.partial + data
        pieces = data.split(b'\n')
        self.partial = pieces.pop()
        # tqdm progress bars redraw with \r: the last redraw is the line's state.
        lines = [redact(strip_ansi(p.decode('utf-8', 'replace').split('\r')[-1]).rstrip(), self.secrets)
                 for p in pieces]
        lines = [line for line in lines if line.strip()]
        self.tail.extend(line for line in lines if not OWN_REQUEST.search(line))
        return lines

    @property
    def last_line(self):
        return self.tail[-1] if self.tail else ''


def phase_of(current, lines=(), port_open=False):
    """The phase a start has reached, given new log lines and the port; never goes back."""
    rank = PHASES.index(current)
    for line in lines:
        if any(marker in line for marker in _LOADING_MARKERS):
            rank = max(rank, PHASES.index('loading'))
        elif rank < PHASES.index('process_up'):
            rank = PHASES.index('process_up')
        if READY_LINE in line:
            rank = max(rank, PHASES.index('warmup'))
    if port_open:
        rank = max(rank, PHASES.index('warmup'))
    return PHASES[rank]


class ProgressFile:
    """The JSON the role polls while the module runs under `async` (it prints nothing until done).

    Written atomically (rename), at most every `every` seconds unless the phase or state changed.
    Each record names the `revision` of the start when one is given: the role's wait ends only on a
    record of its own start, so an earlier start's file (ready or failed) needs no task to remove it.
    """

    def __init__(self, path, every=1.0, clock=time.monotonic, wall=time.time, revision=None):
        self.path = path
        self.revision = revision
        self.every = every
        self.clock = clock
        self.wall = wall
        self.last_write = None
        self.last_key = None

    def update(self, state, phase, elapsed, last_line, force=False, **extra):
        key = (state, phase)
        now = self.clock()
        if not force and key == self.last_key and self.last_write is not None and now - self.last_write < self.every:
            return False
        record = {'state': state, 'phase': phase, 'elapsed': round(elapsed, 1), 'last_line': last_line[-300:],
                  'updated': round(self.wall(), 3)}
        record.update(extra)
        if self.revision:
            record['revision'] = self.revision
        try:
            replace_text(self.path, json.dumps(record), 0o640)
        except (IOError, OSError):
            return False
        self.last_write, self.last_key = now, key
        return True
