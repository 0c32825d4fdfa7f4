# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Live loads (/get_load, /v1/loads) against the sampled gauges of /metrics."""

from __future__ import annotations

import json
import re
import threading
import time

from sglang.standin import loads, metrics

READY = 'The server is fired up and ready to roll!'
KEY = 'K'


def gauges(server):
    body = server.request('GET', '/metrics')[1]
    found = dict(re.findall(r'^sglang:(num_running_reqs|num_queue_reqs)\{[^}]*\} (\S+)$', body, re.M))
    return int(float(found['num_running_reqs'])), int(float(found['num_queue_reqs']))


def live(server):
    load = json.loads(server.request('GET', '/v1/loads', key=KEY)[1])['loads'][0]
    return load['num_running_reqs'], load['num_waiting_reqs']


def wait_live(server, wanted):
    deadline = time.monotonic() + 3
    while live(server) != wanted and time.monotonic() < deadline:
        time.sleep(0.01)
    assert live(server) == wanted


def start_requests(server, count, tokens):
    """`count` generations, each started once the previous one is in (running or waiting)."""
    results = []

    def run():
        results.append(server.request('POST', '/generate', {'text': 'Hi', 'sampling_params': {'max_new_tokens': tokens}},
                                      key=KEY, timeout=30)[0])
    threads = [threading.Thread(target=run) for _index in range(count)]
    for index, thread in enumerate(threads):
        thread.start()
        wait_live(server, (1, index))
    return threads, results


def test_idle_refresh_by_release():
    old, new = metrics.Metrics('m', version='0.5.9'), metrics.Metrics('m', version='0.5.23')
    for gauge in (old, new):
        gauge.enqueue()
        gauge.admit()
        gauge.decode_sample()
        gauge.finish(admitted=True)
    assert old.gauges() == (1, 0)  # until 30 s passed since the last sample
    assert new.gauges() == (0, 0)  # the cached running count differs from the live one: refreshed at once
    old.idle_seconds = 0
    assert old.gauges() == (0, 0)


def test_loads_bodies_by_release():
    snap = loads.Snapshot(running=1, waiting=2, used_tokens=10, waiting_tokens=4, max_total_num_tokens=100,
                          max_running_requests=8, weight_gb=1.0, kv_cache_gb=2.0, graph_gb=0.5)
    assert list(loads.get_load(snap)[0]) == ['rid', 'http_worker_ipc', 'dp_rank', 'num_reqs', 'num_waiting_reqs',
                                             'num_tokens', 'ts_tic']
    status, body = loads.v1_loads(snap, {}, '0.5.9', 'GPU', 1)
    assert status == 200 and list(body) == ['timestamp', 'version', 'dp_rank_count', 'loads', 'aggregate']
    assert 'dp_rank' not in body['loads'][0]  # None without data parallelism: the dict factory drops it
    assert body['loads'][0]['num_total_reqs'] == 3 and body['aggregate']['total_reqs'] == 3
    assert loads.v1_loads(snap, {'dp_rank': '0'}, '0.5.9', 'GPU', 1)[1]['loads'] == []
    status, body = loads.v1_loads(snap, {'include': 'core,bogus'}, '0.5.9', 'GPU', 1)
    assert status == 400 and body['detail'].startswith("Invalid include sections: {'bogus'}. Valid options: ['all', ")
    assert loads.v1_loads(snap, {'include': 'bogus'}, '0.5.23', 'GPU', 1) == (500, None)
    status, body = loads.v1_loads(snap, {'include': 'queues'}, '0.5.23', 'GPU', 1)
    assert list(body['loads'][0])[-1] == 'queues' and 'memory' not in body['loads'][0]


def test_0_5_9_loads_are_live_while_the_gauges_are_sampled(standin):
    server = standin(['--enable-metrics', '--api-key', KEY], env={'SGLANG_STANDIN_TOKEN_SECONDS': '0.015'})
    server.wait_for(READY)
    assert server.request('GET', '/v1/loads')[0] == 401  # not exempt from the key, unlike /metrics
    assert server.request('GET', '/get_load')[0] == 401
    threads, results = start_requests(server, 2, 100)  # 1.5 s each, the second waits for the first
    # The gauges say what the first one's prefill sampled: none running before it, none waiting yet.
    # The second one arrived after that sample: /metrics does not count it, /v1/loads does.
    assert live(server) == (1, 1) and gauges(server) == (0, 0)
    status, body = server.request('GET', '/get_load', key=KEY)
    load = json.loads(body)
    assert status == 200 and len(load) == 1
    assert (load[0]['rid'], load[0]['dp_rank'], load[0]['num_reqs'], load[0]['num_waiting_reqs']) == (None, None, 2, 1)
    assert "Endpoint '/get_load' is deprecated and will be removed in a future version. Please use '/v1/loads' " \
           "instead." in server.log()
    # the 40th decode step samples the running request (the warmup used 7 of them)
    deadline = time.monotonic() + 3
    while gauges(server) != (1, 1) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gauges(server) == (1, 1)
    for thread in threads:
        thread.join(10)
    assert results == [200, 200]
    assert live(server) == (0, 0)
    assert gauges(server) == (1, 0)  # 0.5.9 keeps the last sample until it idled 30 s
    server.terminate()
    server.assert_gone()


def test_0_5_23_refreshes_the_gauges_when_idle(standin):
    server = standin(['--enable-metrics', '--api-key', KEY],
                     env={'SGLANG_STANDIN_TOKEN_SECONDS': '0.005', 'SGLANG_STANDIN_VERSION': '0.5.23'})
    server.wait_for(READY)
    threads, results = start_requests(server, 1, 100)
    deadline = time.monotonic() + 3
    while gauges(server) != (1, 0) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gauges(server) == (1, 0) and live(server) == (1, 0)
    threads[0].join(10)
    assert results == [200] and gauges(server) == (0, 0)
    assert server.terminate()[0] == 0
    server.assert_gone()
