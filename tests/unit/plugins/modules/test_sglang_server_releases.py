# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module end to end against the stand-in playing each supported release (SGLANG_STANDIN_VERSION):
what real SGLang does that the module must take as it is (issue 27)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import urllib.request

import pytest

from ports import free_port

from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs

RELEASES = ['0.5.9', '0.5.23']


def run(server, version, extra_args=(), **overrides):
    """The module against the stand-in playing `version`, with `extra_args` after its arguments."""
    overrides['env'] = dict(overrides.get('env', {}), SGLANG_STANDIN_VERSION=version)
    return server['run'](command=server['base']['command'] + list(extra_args), **overrides)


def log_text(server):
    with open(server['base']['log_path']) as handle:
        return handle.read()


@pytest.mark.parametrize('version', RELEASES)
def test_a_stop_lets_a_request_in_flight_finish(server, version):
    # The ranks have no SIGTERM handler: a SIGTERM to the process group (KillMode=control-group)
    # would kill them mid-request. The main process alone drains.
    started = run(server, version, revision='r1')
    assert started['ready'], started['msg']
    answer = {}

    def generate():
        body = json.dumps({'text': 'a long story', 'sampling_params': {'max_new_tokens': 1500, 'ignore_eos': True}})
        request = urllib.request.Request('http://127.0.0.1:%d/generate' % server['base']['port'], data=body.encode(),
                                         headers={'Content-Type': 'application/json'})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                answer['status'], answer['body'] = response.status, json.loads(response.read())
        except Exception as exc:  # pylint: disable=broad-except
            answer['error'] = repr(exc)
    client = threading.Thread(target=generate)
    client.start()
    threading.Event().wait(0.5)
    stopped = run(server, version, state='stopped')
    client.join(60)
    assert stopped['changed'] and not any(procfs.alive(p) for p in started['pids'])
    assert answer.get('status') == 200, answer
    assert answer['body']['meta_info']['completion_tokens'] == 1500
    assert 'SIGTERM received' in log_text(server)


@pytest.mark.parametrize('version', RELEASES)
def test_a_follower_is_ready_on_its_health_server_without_a_ready_line(server, version):
    # A follower's ranks meet rank 0's at --dist-init-addr before anything is ready: rank 0 runs beside it.
    dist = '127.0.0.1:%d' % free_port()
    group = ['--nnodes', '2', '--dist-init-addr', dist]
    command = server['base']['command']
    rank_0 = command[:command.index('--port') + 1] + [str(free_port())] + command[command.index('--port') + 2:]
    leader = subprocess.Popen(rank_0 + group + ['--node-rank', '0'], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                              env=dict(os.environ, **dict(server['base']['environment'], SGLANG_STANDIN_VERSION=version)))
    try:
        result = run(server, version, group + ['--node-rank', '1'], probe=False, revision='f1')
    finally:
        leader.kill()
        leader.wait()
    assert result['ready'], result['msg']
    text = log_text(server)
    assert 'Dummy health check server started in background thread at' in text
    assert 'The server is fired up and ready to roll!' not in text


@pytest.mark.parametrize('version', RELEASES)
def test_a_server_that_prints_no_info_lines_is_judged_by_http(server, version):
    # --log-level warning hides the start marker and the ready line (both INFO).
    result = run(server, version, ['--log-level', 'warning'], ready_line=False, revision='w1', timeout=30)
    assert result['ready'], result['msg']
    text = log_text(server)
    assert 'ready to roll' not in text and 'server_args=' not in text


def test_the_current_releases_start_marker_keeps_old_failures_out_of_a_running_servers_verdict(server):
    # An earlier start failed: its crash lines stay in the append-only log. A running server of the
    # current release is then attached to from its own start marker, server_args={...}; were that
    # marker unknown, the log would be read from byte 0 and the old crash would fail a healthy server.
    (server['tmp'] / 'fault').write_text('rank_crash\n')
    failed = run(server, '0.5.23', env={'SGLANG_STANDIN_FAULT_DELAY': '0.2'})
    assert failed['failed'] and failed['cause'] == 'rank_crash', failed['msg']
    (server['tmp'] / 'fault').write_text('none\n')
    first = run(server, '0.5.23', revision='r1')
    assert first['ready'], first['msg']
    assert 'server_args={' in log_text(server)
    os.unlink(os.path.join(os.path.dirname(server['base']['log_path']), 'ready.json'))  # a run the gate never saw
    again = run(server, '0.5.23', revision='r1')
    assert again['ready'] and not again['changed'], again.get('msg')


@pytest.mark.parametrize('version,fault,cause', [
    ('0.5.9', 'missing_module', 'missing_module'),
    ('0.5.9', 'capture_nccl', 'cuda_graph_nccl'),
    ('0.5.23', 'capture_kernel', 'cuda_graph_kernel'),
    ('0.5.23', 'rank_crash', 'rank_crash'),
])
def test_the_releases_failures_are_named(server, version, fault, cause):
    (server['tmp'] / 'fault').write_text(fault + '\n')
    result = run(server, version, env={'SGLANG_STANDIN_FAULT_DELAY': '0.2'})
    assert result['failed'] and result['cause'] == cause, result['msg']


def test_the_current_release_refuses_the_old_option_as_real_argparse_does(server):
    result = run(server, '0.5.23', ['--cuda-graph-max-bs', '128'], timeout=20)
    assert result['failed'] and result['cause'] == 'bad_arguments', result['msg']
    assert any('ambiguous option: --cuda-graph-max-bs' in line for line in result['log_tail']), result['log_tail']
