# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drain's live in-flight count: /v1/loads of both supported releases, /metrics where it is missing.

The answers are built field for field from the wheels' definitions: 0.5.9 entrypoints/v1_loads.py
(dataclasses.asdict of GetLoadsReqOutput plus num_total_reqs, and an aggregate), 0.5.23
managers/load_snapshot.py (LoadSnapshot.to_dict of the core keys, no aggregate).
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.gateway import GatewayError
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.node_load import NodeLoad, loads_in_flight

V059 = {'timestamp': '2026-12-04T10:00:00.000000+00:00', 'version': '0.5.9', 'dp_rank_count': 2,
        'loads': [{'dp_rank': 0, 'timestamp': 1733306400.0, 'num_running_reqs': 3, 'num_waiting_reqs': 1,
                   'num_used_tokens': 512, 'max_total_num_tokens': 100000, 'token_usage': 0.005, 'gen_throughput': 80.0,
                   'cache_hit_rate': 0.0, 'utilization': 0.1, 'max_running_requests': 256, 'num_total_reqs': 4},
                  {'dp_rank': 1, 'timestamp': 1733306400.0, 'num_running_reqs': 0, 'num_waiting_reqs': 2,
                   'num_used_tokens': 0, 'max_total_num_tokens': 100000, 'token_usage': 0.0, 'gen_throughput': 0.0,
                   'cache_hit_rate': 0.0, 'utilization': 0.0, 'max_running_requests': 256, 'num_total_reqs': 2}],
        'aggregate': {'total_running_reqs': 3, 'total_waiting_reqs': 3, 'total_reqs': 6}}
V0523 = {'timestamp': '2026-12-04T10:00:00.000000+00:00', 'version': '0.5.23', 'accelerator': 'NVIDIA H200',
         'num_accelerators': 8,
         'loads': [{'timestamp': 1733306400.0, 'dp_rank': 0, 'num_running_reqs': 2, 'num_waiting_reqs': 0,
                    'num_waiting_uncached_tokens': 0, 'num_used_tokens': 300, 'num_total_tokens': 300,
                    'num_active_tokens': 300, 'num_prealloc_ready_tokens': 0, 'max_total_num_tokens': 100000,
                    'max_running_requests': 256, 'token_usage': 0.003, 'gen_throughput': 50.0, 'cache_hit_rate': 0.0,
                    'utilization': 0.01, 'total_prefill_uncached_tokens': 900, 'total_prefill_busy_us': 1200,
                    'decode_moments': None}]}
STALE_METRICS = 'sglang:num_running_reqs{model_name="m"} 0.0\nsglang:num_queue_reqs{model_name="m"} 0.0\n'


def test_both_releases_answers_are_summed_over_their_dp_ranks():
    assert loads_in_flight(json.dumps(V059)) == {'in_flight': 6, 'running': 3, 'queued': 3}
    assert loads_in_flight(json.dumps(V0523)) == {'in_flight': 2, 'running': 2, 'queued': 0}


@pytest.mark.parametrize('text', ['[]', '{"loads": []}', '{"loads": [{"num_running_reqs": -1}]}',
                                  '{"loads": [{"num_running_reqs": true}]}', '{"loads": [1]}', 'x'])
def test_no_loads_is_no_count(text):
    with pytest.raises(ValueError):
        loads_in_flight(text)


class Node:
    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, method, url, headers, body, timeout):
        self.calls.append((url, headers.get('Authorization')))
        return self.answers[url.split(':30000', 1)[1]]


def test_the_live_count_is_read_with_the_servers_key_and_beats_a_stale_sample():
    node = Node({'/v1/loads?include=core': (200, json.dumps(V0523), None), '/metrics': (200, STALE_METRICS, None)})
    counts = NodeLoad(node, 'http://10.0.0.1:30000', api_key='sk-node').read()
    assert counts == {'in_flight': 2, 'running': 2, 'queued': 0, 'refused': False,
                      'source': 'http://10.0.0.1:30000/v1/loads?include=core'}
    assert node.calls == [('http://10.0.0.1:30000/v1/loads?include=core', 'Bearer sk-node')]


def test_a_release_without_v1_loads_is_read_from_metrics_from_then_on():
    node = Node({'/v1/loads?include=core': (404, '{"detail":"Not Found"}', None), '/metrics': (200, STALE_METRICS, None)})
    load = NodeLoad(node, 'http://10.0.0.1:30000')
    assert load.read()['source'] == 'http://10.0.0.1:30000/metrics'
    assert load.read()['in_flight'] == 0
    assert [url for url, dummy in node.calls].count('http://10.0.0.1:30000/v1/loads?include=core') == 1


def test_refused_unauthorized_and_odd_answers():
    assert NodeLoad(Node({'/v1/loads?include=core': (None, '', '[Errno 111] Connection refused')}),
                    'http://h:30000').read()['refused'] is True
    with pytest.raises(GatewayError, match='its API key is needed'):
        NodeLoad(Node({'/v1/loads?include=core': (401, '', None)}), 'http://h:30000').read()
    with pytest.raises(GatewayError, match='has no loads'):
        NodeLoad(Node({'/v1/loads?include=core': (200, '{}', None)}), 'http://h:30000').read()
    with pytest.raises(GatewayError, match='HTTP 500'):
        NodeLoad(Node({'/v1/loads?include=core': (500, 'boom', None)}), 'http://h:30000').read()
