# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Multi-node in CPU mode (sglang/standin/rendezvous.py): the ranks of node rank 0 and node rank 1 meet
over TCP at --dist-init-addr as torch's TCPStore rendezvous does, every request goes through that
connection, and a failure on one side ends the other, with the real torch and gloo texts."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time

import pytest
from ports import free_port  # tests/unit/ports.py

from sglang.standin import rendezvous
from sglang.standin.settings import Settings

READY = 'The server is fired up and ready to roll!'
DUMMY = 'Dummy health check server started in background thread at 127.0.0.1:%d'
GLOO_CLOSED = 'RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:547] Connection closed by peer [127.0.0.1]:'
GLOO_RESET = 'RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:538] Read error [127.0.0.1]:'

LAUNCH_SIGQUIT = 'Received sigquit from a child process. It usually means the child failed.'
RUNNING_SIGQUIT = 'SIGQUIT received. signum=None, frame=None. It usually means one child failed.'
SHORT = {'SGLANG_STANDIN_DIST_TIMEOUT': '1'}


def lost_peer(log):
    """gloo's text for a peer gone: closed, or reset when the peer died with data unread (which of the two
    depends on timing, as on real hosts)."""
    return GLOO_CLOSED in log or (GLOO_RESET in log and 'Connection reset by peer' in log)


def sockets(port, state):
    """{inode: (local address hex, remote port)} of the TCP sockets in `state` ('0A' listen, '01'
    established) whose local (listen) or remote (established) port is `port` (/proc/net/tcp, tcp6)."""
    found = {}
    for name in ('tcp', 'tcp6'):
        try:
            with open('/proc/net/' + name) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, remote = fields[1].rsplit(':', 1), fields[2].rsplit(':', 1)
            wanted = int(local[1], 16) if state == '0A' else int(remote[1], 16)
            if fields[3] == state and wanted == port:
                found[fields[9]] = (local[0], int(remote[1], 16))
    return found


def socket_inodes(pid):
    inodes = set()
    for fd in os.listdir('/proc/%d/fd' % pid):
        try:
            target = os.readlink('/proc/%d/fd/%s' % (pid, fd))
        except OSError:
            continue
        if target.startswith('socket:['):
            inodes.add(target[len('socket:['):-1])
    return inodes


def listening_pids(server, port):
    """The processes of `server` that listen on `port`, and on which local addresses."""
    listeners = sockets(port, '0A')
    return {pid: sorted(listeners[inode][0] for inode in socket_inodes(pid) if inode in listeners)
            for pid in server.pids() if socket_inodes(pid) & set(listeners)}


def generate(server, tokens=6, timeout=10):
    status, body = server.request('POST', '/generate', {'text': 'Hi', 'sampling_params': {'max_new_tokens': tokens}},
                                  timeout=timeout)
    assert status == 200, body
    return json.loads(body)['meta_info']['completion_tokens']


def test_the_dist_timeout_setting():
    assert Settings({}).dist_timeout is None  # torch's own: --dist-timeout, else 600 s
    assert Settings({'SGLANG_STANDIN_DIST_TIMEOUT': '1.5'}).dist_timeout == 1.5
    assert Settings({'SGLANG_STANDIN_DIST_TIMEOUT': '0'}).dist_timeout is None
    assert rendezvous.DEFAULT_TIMEOUT_SECONDS == 600
    assert rendezvous.split_init_method('tcp://10.0.0.1:5000') == ('10.0.0.1', 5000)
    assert rendezvous.split_init_method('tcp://[fd00::1]:5000') == ('fd00::1', 5000)


def test_two_nodes_meet_at_the_dist_port_and_every_request_goes_through_the_follower(node):
    dist = free_port()
    leader = node(0, dist)
    follower = node(1, dist)
    leader.wait_for(READY)
    follower.wait_for(DUMMY % follower.port)
    assert generate(leader) == 6
    assert follower.request('GET', '/health_generate') == (200, '')
    # rank 0's rank (not its main process) holds the store's port, on every interface
    lead_rank, = leader.rank_pids()
    assert listening_pids(leader, dist) in ({lead_rank: ['00000000000000000000000000000000']},
                                            {lead_rank: ['00000000']})
    assert not listening_pids(follower, dist)
    # the follower's rank is connected to it
    follower_rank, = follower.rank_pids()
    assert socket_inodes(follower_rank) & set(sockets(dist, '01'))
    assert ' TP0] ' in leader.log() and ' TP1] ' not in leader.log() and ' TP1] ' in follower.log()
    # a frozen follower rank holds every request up: each one waits for its ack
    os.kill(follower_rank, signal.SIGSTOP)
    try:
        with pytest.raises(socket.timeout):
            generate(leader, timeout=1)
    finally:
        os.kill(follower_rank, signal.SIGCONT)
    assert generate(leader, tokens=3) == 3
    assert READY not in follower.log() and 'Uvicorn running' not in follower.log()


def test_a_follower_started_first_waits_for_rank_0(node):
    dist = free_port()
    follower = node(1, dist, tp=4)
    follower.wait_for('Init torch distributed begin.')
    follower.wait_for('sees: ')  # its ranks try to connect, refused, and retry
    time.sleep(1.0)
    log = follower.log()
    assert 'Init torch distributed ends.' not in log and DUMMY % follower.port not in log
    with pytest.raises(ConnectionRefusedError):
        follower.request('GET', '/health')
    leader = node(0, dist, tp=4)
    leader.wait_for(READY)
    follower.wait_for(DUMMY % follower.port)
    assert generate(leader) == 6
    # the follower's ranks waited for rank 0: their init took at least the second rank 0 came later
    waited = [float(value) for value in re.findall(r'Init torch distributed ends\. elapsed=([0-9.]+) s', follower.log())]
    assert len(waited) == 2 and min(waited) >= 1.0


@pytest.mark.parametrize('version', ['0.5.9', '0.5.23'])
def test_a_follower_alone_times_out_connecting(node, version):
    dist = free_port()
    follower = node(1, dist, env=dict(SHORT, SGLANG_STANDIN_VERSION=version))
    assert follower.wait_exit(10) == -signal.SIGKILL
    log = follower.log()
    text = 'The client socket has timed out after 1000ms while trying to connect to (127.0.0.1, %d).' % dist
    assert 'torch.distributed.DistNetworkError: ' + text in log
    assert '[c10d] ' + text in log  # c10d's own ERROR line first
    assert 'Scheduler hit an exception: Traceback' in log and LAUNCH_SIGQUIT in log
    assert DUMMY % follower.port not in log and 'Load weight begin' not in log
    follower.assert_gone()


@pytest.mark.parametrize('version', ['0.5.9', '0.5.23'])
def test_rank_0_alone_times_out_waiting_for_clients(node, version):
    dist = free_port()
    # the real option: torch's rendezvous takes --dist-timeout as its timeout
    leader = node(0, dist, args=['--dist-timeout', '1'], env={'SGLANG_STANDIN_VERSION': version})
    assert leader.wait_exit(10) == -signal.SIGKILL
    log = leader.log()
    assert 'torch.distributed.DistStoreError: Timed out after 2 seconds waiting for clients. 1/2 clients joined.' in log
    assert 'Scheduler hit an exception: Traceback' in log and LAUNCH_SIGQUIT in log
    assert READY not in log and 'Uvicorn running' not in log
    leader.assert_gone()


def test_a_rank_that_joined_fails_when_rank_0_gives_up(standin):
    # three nodes, the third never comes: rank 0 counts itself and node 1's rank, then gives up; node 1's
    # rank, joined and waiting (with a longer timeout of its own), loses the store
    dist = free_port()
    multi = ['--tp', '3', '--nnodes', '3', '--dist-init-addr', '127.0.0.1:%d' % dist]
    leader = standin(multi + ['--node-rank', '0', '--dist-timeout', '1'])
    follower = standin(multi + ['--node-rank', '1', '--dist-timeout', '5'])
    assert leader.wait_exit(10) == -signal.SIGKILL
    assert 'torch.distributed.DistStoreError: Timed out after 2 seconds waiting for clients. 2/3 clients joined.' \
        in leader.log()
    assert follower.wait_exit(10) == -signal.SIGKILL
    assert ('torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the '
            'remote server shutdown or crash?') in follower.log()
    assert LAUNCH_SIGQUIT in follower.log()
    follower.assert_gone()


def test_a_follower_that_reached_no_rank_0_waits_out_the_timeout(node):
    # something listens on the port but never completes the world (it never accepts): the follower's
    # rank is connected and waits, as a store get waits, the timeout long
    dist = free_port()
    with socket.socket() as mute:
        mute.bind(('127.0.0.1', dist))
        mute.listen(8)
        follower = node(1, dist, env=SHORT)
        assert follower.wait_exit(10) == -signal.SIGKILL
    log = follower.log()
    assert 'torch.distributed.DistStoreError: wait timeout after 1000ms, keys: /default_pg/0//cuda//0' in log
    assert 'client socket has timed out' not in log and DUMMY % follower.port not in log
    follower.assert_gone()


def test_a_taken_dist_port_fails_rank_0(node):
    dist = free_port()
    with socket.socket() as taken:
        taken.bind(('0.0.0.0', dist))
        taken.listen(1)
        leader = node(0, dist)
        assert leader.wait_exit(10) == -signal.SIGKILL
    assert ('torch.distributed.DistNetworkError: The server socket has failed to listen on any local network '
            'address. port: %d, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use'
            % dist) in leader.log()
    leader.assert_gone()


def test_a_rank_crash_on_the_follower_ends_rank_0_too(node):
    dist = free_port()
    leader = node(0, dist)
    follower = node(1, dist, env={'SGLANG_STANDIN_FAULT': 'rank_crash'})
    assert follower.wait_exit(10) == -signal.SIGKILL
    assert leader.wait_exit(10) == -signal.SIGKILL
    flog, log = follower.log(), leader.log()
    # the follower's rank joined first (the rendezvous is part of init), then crashed loading
    assert flog.index('Init torch distributed ends.') < flog.index("KeyError: 'model.layers.18.self_attn.qkv_proj.weight'")
    assert LAUNCH_SIGQUIT in flog
    assert lost_peer(log) and 'Scheduler hit an exception: Traceback' in log and LAUNCH_SIGQUIT in log
    assert READY not in log
    follower.assert_gone()
    leader.assert_gone()


def test_rank_0_fails_when_the_follower_node_dies(node):
    dist = free_port()
    leader = node(0, dist)
    follower = node(1, dist)
    leader.wait_for(READY)
    follower.wait_for(DUMMY % follower.port)
    follower.kill_all()  # the whole node, its main process and its ranks
    with pytest.raises(OSError):
        generate(leader, timeout=5)
    assert leader.wait_exit(10) == -signal.SIGKILL
    log = leader.log()
    assert lost_peer(log)
    assert 'Scheduler hit an exception: Traceback' in log and RUNNING_SIGQUIT in log  # after the first request
    leader.assert_gone()


def test_a_single_node_launch_opens_no_socket_on_the_dist_port(standin):
    dist = free_port()
    server = standin(['--tp', '2', '--dist-init-addr', '127.0.0.1:%d' % dist])
    server.wait_for(READY)
    assert generate(server) == 6
    assert not listening_pids(server, dist) and not sockets(dist, '0A') and not sockets(dist, '01')


def test_0_5_9_rank_0_stopped_ends_the_followers_ranks(node):
    # 0.5.9's drain ends in SIGKILL to its own tree: the follower's ranks lose rank 0 and fail
    dist = free_port()
    leader = node(0, dist)
    follower = node(1, dist)
    leader.wait_for(READY)
    follower.wait_for(DUMMY % follower.port)
    assert leader.terminate(timeout=5)[0] == -signal.SIGKILL
    assert follower.wait_exit(10) == -signal.SIGKILL
    flog = follower.log()
    assert 'RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:547] Connection closed by peer ' \
           '[127.0.0.1]:%d' % dist in flog
    assert 'Scheduler hit an exception: Traceback' in flog and LAUNCH_SIGQUIT in flog
    follower.assert_gone()


def test_0_5_23_rank_0_stopped_stops_the_follower_through_the_shutdown_broadcast(node):
    # 0.5.23's drain sends ShutdownReq to the lead scheduler, which broadcasts it: every rank, on every
    # node, leaves its event loop and exits 0; the follower's main process joins them and returns.
    dist = free_port()
    env = {'SGLANG_STANDIN_VERSION': '0.5.23'}
    leader = node(0, dist, env=env, tp=4)  # TP0 (the lead) and TP1 on node 0, TP2 and TP3 on node 1
    follower = node(1, dist, env=env, tp=4)
    leader.wait_for(READY)
    follower.wait_for(DUMMY % follower.port)
    follower.proc.send_signal(signal.SIGTERM)  # it waits for rank 0's ShutdownReq broadcast
    follower.wait_for('SIGTERM received on node_rank 1; waiting for the rank-0 ShutdownReq broadcast')
    ranks = follower.rank_pids()
    assert leader.terminate(timeout=5)[0] == 0
    assert follower.wait_exit(10) == 0
    flog = follower.log()
    for pid in ranks:
        assert 'Scheduler or DataParallelController %d terminated with 0' % pid in flog
    assert 'Connection closed by peer' not in flog and 'Connection closed by peer' not in leader.log()
    follower.assert_gone()
    leader.assert_gone()
