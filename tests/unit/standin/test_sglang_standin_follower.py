# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A multi-node follower (--node-rank 1): ranks, a dummy health server, never the ready line.

Its ranks become ready only once they met rank 0's at --dist-init-addr (sglang/standin/rendezvous.py),
so each test starts a rank 0 of the same launch (`--tp 4 --nnodes 2`, TP0 and TP1 there, TP2 and TP3
here) on a free port; test_sglang_standin_multinode.py covers the meeting itself.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from ports import free_port  # tests/unit/ports.py

READY = 'The server is fired up and ready to roll!'
DUMMY = 'Dummy health check server started in background thread at 127.0.0.1:%d'


def start_pair(node, env):
    """(rank 0, follower) of one launch, both started; the follower with --enable-metrics."""
    dist = free_port()
    leader = node(0, dist, env=env, tp=4)
    follower = node(1, dist, args=['--enable-metrics'], env=env, tp=4)
    return leader, follower


def assert_health_server(server):
    for path in ('/health', '/health_generate', '/ping', '/metrics'):
        status, body = server.request('GET', path)
        assert status == 200 and (body == '' or path == '/metrics')


def kill_ranks(server):
    ranks = server.rank_pids()
    for pid in ranks:
        os.kill(pid, signal.SIGKILL)
    return ranks


@pytest.mark.parametrize('version', ['0.5.9', '0.5.23'])
def test_follower_ranks_exit(node, version):
    _leader, server = start_pair(node, {'SGLANG_STANDIN_VERSION': version})
    server.wait_for(DUMMY % server.port)
    assert_health_server(server)
    ranks = kill_ranks(server)  # whatever the ranks do, the dummy server says 200 ...
    status = server.wait_exit(5)  # ... until the main process, joining them, sees them go
    log = server.log()
    for pid in ranks:
        assert 'Scheduler or DataParallelController %d terminated with -9' % pid in log
    assert READY not in log and 'Uvicorn running' not in log
    if version == '0.5.23':
        # launch_server returns; launch_server.py's finally logs its kill_process_tree
        assert status == 0 and 'kill_process_tree called: parent_pid=%d' % server.proc.pid in log
    else:
        # 0.5.9 goes on to start the HTTP server without a tokenizer manager: the lifespan fails
        assert status == 3
        assert "AttributeError: 'NoneType' object has no attribute 'server_args'" in log
        assert log.rstrip().endswith('ERROR:    Application startup failed. Exiting.')
    server.assert_gone()


def test_0_5_23_follower_waits_for_rank_0_on_sigterm(node):
    _leader, server = start_pair(node, {'SGLANG_STANDIN_VERSION': '0.5.23', 'SGLANG_STANDIN_LOAD_SECONDS': '1'})
    server.wait_for('Load weight begin')
    server.wait_for(DUMMY % server.port)
    server.proc.send_signal(signal.SIGTERM)
    server.wait_for('SIGTERM received on node_rank 1; waiting for the rank-0 ShutdownReq broadcast to stop the '
                    'schedulers.')
    time.sleep(0.3)
    assert server.proc.poll() is None
    assert_health_server(server)
    server.kill_all()
    server.assert_gone()


def test_follower_sigterm_while_loading_is_the_default_action(node):
    # 0.5.23 installs its follower handler only once the ranks are ready
    _leader, server = start_pair(node, {'SGLANG_STANDIN_VERSION': '0.5.23', 'SGLANG_STANDIN_LOAD_SECONDS': '1'})
    server.wait_for('Load weight begin')
    status, took = server.terminate()
    assert status == -signal.SIGTERM and took < 1
    with pytest.raises(ConnectionRefusedError):
        server.request('GET', '/health')
    server.assert_gone()
