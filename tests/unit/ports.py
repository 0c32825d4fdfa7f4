# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one free_port of the unit suite (tests/unit/conftest.py puts this folder on sys.path)."""

from __future__ import annotations

import itertools
import os
import socket

# Each xdist worker hands out ports of its own block, below Linux's ephemeral range (32768-60999),
# from which the kernel picks for bind(('', 0)) and for every client connection: a port taken that
# way could be handed to another worker, or taken by a client, before the stand-in bound it (seen
# in CI: two stand-ins on one port, one test froze the other's ranks).
PORT_BLOCK = 1500
_ports = itertools.count()


def free_port():
    worker = os.environ.get('PYTEST_XDIST_WORKER', 'gw0')[2:]
    base = 20000 + (int(worker) if worker.isdigit() else 0) % 8 * PORT_BLOCK
    for dummy in range(PORT_BLOCK):
        port = base + next(_ports) % PORT_BLOCK
        with socket.socket() as sock:
            try:
                sock.bind(('127.0.0.1', port))
            except OSError:
                continue
            return port
    raise RuntimeError('no free port in %d-%d' % (base, base + PORT_BLOCK - 1))
