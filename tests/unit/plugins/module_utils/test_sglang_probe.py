# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The readiness decision: what SGLang answers during warmup must not count as ready."""

from __future__ import annotations

import json

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.probe import (
    Probe, base_url, check_ready, probe_host,
)

GENERATE_OK = json.dumps({'text': ' Paris, and the capital of Italy', 'meta_info': {
    'id': 'a1', 'prompt_tokens': 6, 'completion_tokens': 8, 'finish_reason': {'type': 'length', 'length': 8}}})
MODELS_OK = json.dumps({'object': 'list', 'data': [{'id': 'kimi-k2.5', 'object': 'model', 'owned_by': 'sglang'}]})


class Server:
    """Answers like SGLang in one phase; records what was asked."""

    def __init__(self, health=200, generate=(200, GENERATE_OK), models=(200, MODELS_OK)):
        self.answers = {'/health_generate': (health, ''), '/generate': generate, '/v1/models': models,
                        '/model_info': (200, json.dumps({'model_path': '/m', 'is_generation': True}))}
        self.calls = []

    def __call__(self, method, url, headers, body, timeout):
        path = url.split(':30000', 1)[1]
        self.calls.append((method, path, headers, body, timeout))
        status, text = self.answers[path]
        if status is None:
            return None, '', 'Connection refused'
        return status, text, None


def ready(server, ready_line=True, skip_warmup=False, expected=None):
    probe = Probe(server, '127.0.0.1', 30000, api_key='k', health_timeout=25)
    return check_ready(probe, lambda s: s, ready_line, skip_warmup, expected), probe


def test_everything_passes_and_reports_the_sample():
    server = Server()
    (ok, reason, permanent), probe = ready(server, expected='kimi-k2.5')
    assert ok and reason is None and not permanent
    assert probe.sample['completion_tokens'] == 8 and probe.served_model_name == 'kimi-k2.5'
    assert probe.model_info['model_path'] == '/m'
    method, path, headers, body, timeout = server.calls[1]
    assert (method, path) == ('POST', '/generate') and headers['Authorization'] == 'Bearer k'
    assert json.loads(body)['sampling_params'] == {'max_new_tokens': 8, 'temperature': 0}
    assert server.calls[0][4] == 25  # /health_generate gets the >= 25 s client timeout


def test_warmup_503_is_not_ready_even_though_models_answers():
    (ok, reason, permanent), dummy = ready(Server(health=503))
    assert not ok and not permanent and '503' in reason


def test_health_without_the_ready_line_is_not_ready_unless_warmup_is_skipped():
    (ok, reason, dummy), unused = ready(Server(), ready_line=False)
    assert not ok and 'ready to roll' in reason
    (ok, reason, dummy), unused = ready(Server(), ready_line=False, skip_warmup=True)
    assert ok


def test_a_generation_without_tokens_is_a_definite_failure_and_no_answer_a_temporary_one():
    # A 200 is the scheduler's finished answer: asking again for 50 minutes gets the same.
    empty = json.dumps({'text': '', 'meta_info': {'completion_tokens': 0}})
    (ok, reason, permanent), unused = ready(Server(generate=(200, empty)))
    assert not ok and 'no completion token' in reason and permanent == 'no_tokens'
    (ok, reason, permanent), unused = ready(Server(generate=(200, json.dumps({'text': 'x'}))))
    assert not ok and permanent == 'no_tokens'
    (ok, reason, permanent), unused = ready(Server(generate=(None, '')))
    assert not ok and 'no answer' in reason and permanent is None
    (ok, reason, permanent), unused = ready(Server(generate=(503, 'busy')))
    assert not ok and 'HTTP 503' in reason and permanent is None


def test_a_wrong_served_model_name_is_permanent():
    (ok, reason, permanent), unused = ready(Server(), expected='other')
    assert not ok and permanent == 'served_model_name' and "'kimi-k2.5'" in reason and "'other'" in reason


def test_the_clamp_bounds_every_request():
    server = Server()
    probe = Probe(server, '127.0.0.1', 30000)
    check_ready(probe, lambda s: min(s, 3), True, False)
    assert all(call[4] <= 3 for call in server.calls)
    assert 'Authorization' not in server.calls[0][2]


def test_wildcard_binds_are_probed_on_loopback():
    assert probe_host('0.0.0.0') == '127.0.0.1'
    assert base_url('::', 30000) == 'http://[::1]:30000'
    assert base_url('10.0.0.5', 8000) == 'http://10.0.0.5:8000'
