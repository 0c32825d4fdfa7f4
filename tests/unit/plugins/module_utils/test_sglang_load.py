# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The throughput gate's logic with a fake HTTP function: the load, the baseline and the verdict."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.sglang import load as sglang_load
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.load import (
    LoadError, choose_baseline, completion_tokens, host_baseline, judge, run_load, throughput_gate,
)


def answer(tokens):
    return json.dumps({'text': ' Paris.' * tokens, 'meta_info': {'completion_tokens': tokens, 'prompt_tokens': 5}})


class FakeServer:
    """Answers POST /generate with `tokens` completion tokens each, recording every call; optional per-call override."""

    def __init__(self, tokens=None, reply=None, delay=0.0):
        self.calls = []
        self.lock = threading.Lock()
        self.tokens = tokens
        self.reply = reply
        self.delay = delay
        self.active = 0
        self.most_active = 0

    def __call__(self, method, url, headers, body, timeout):
        with self.lock:
            self.calls.append({'method': method, 'url': url, 'headers': headers, 'body': json.loads(body),
                               'timeout': timeout})
            number = len(self.calls)
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            if self.delay:
                time.sleep(self.delay)
            if self.reply:
                result = self.reply(number)
                if result is not None:
                    return result
            max_new = json.loads(body)['sampling_params']['max_new_tokens']
            return 200, answer(self.tokens if self.tokens is not None else max_new), None
        finally:
            with self.lock:
                self.active -= 1


def test_the_load_sends_the_fixed_requests_and_counts_output_tokens():
    server = FakeServer(delay=0.02)
    result = run_load(server, '0.0.0.0', 30001, api_key='sk-1', prompt='Hi', max_new_tokens=8, requests=10,
                      concurrency=3, request_timeout=30, timeout=60)
    assert len(server.calls) == 10 and result['output_tokens'] == 80
    call = server.calls[0]
    assert call['method'] == 'POST' and call['url'] == 'http://127.0.0.1:30001/generate'
    assert call['headers']['Authorization'] == 'Bearer sk-1'
    assert call['body'] == {'text': 'Hi', 'sampling_params': {'max_new_tokens': 8, 'temperature': 0,
                                                              'ignore_eos': True}}
    assert 0 < call['timeout'] <= 30
    assert server.most_active == 3  # the workers overlap, at most `concurrency` at once
    assert result['seconds'] > 0
    assert result['tokens_per_second'] == pytest.approx(80 / result['seconds'], rel=0.01)


def test_the_tokens_come_from_the_answers_not_from_the_request():
    server = FakeServer(tokens=3)
    result = run_load(server, '::', 30000, requests=4, concurrency=8, max_new_tokens=64)
    assert result['output_tokens'] == 12 and len(server.calls) == 4
    assert server.calls[0]['url'] == 'http://[::1]:30000/generate'
    assert 'Authorization' not in server.calls[0]['headers']


def test_a_fixed_clock_gives_tokens_over_the_wall_seconds():
    now = {'t': 100.0}

    def advance(number):
        now['t'] += 1.0  # each request takes one second of the fake clock
    result = run_load(FakeServer(reply=advance), 'h', 1, requests=2, concurrency=1, max_new_tokens=10,
                      clock=lambda: now['t'])
    assert result == {'output_tokens': 20, 'seconds': 2.0, 'tokens_per_second': 10.0}


@pytest.mark.parametrize('reply,expect', [
    ((401, '{"error": "Unauthorized"}', None), 'POST /generate (request 2 of 6): HTTP 401 {"error": "Unauthorized"}'),
    ((503, 'x' * 500, None), 'HTTP 503 ' + 'x' * 200 + '...'),
    ((None, '', 'timed out'), 'POST /generate (request 2 of 6): no answer (timed out)'),
    ((200, '{"text": "hi"}', None), 'the answer has no meta_info.completion_tokens: {"text": "hi"}'),
])
def test_a_failed_request_fails_the_load_naming_status_and_body(reply, expect):
    server = FakeServer(reply=lambda number: reply if number == 2 else None)
    with pytest.raises(LoadError) as info:
        run_load(server, 'h', 1, requests=6, concurrency=1)
    assert expect in str(info.value)
    assert len(server.calls) == 2  # nothing more is sent after a failure


def test_an_exception_of_the_transport_is_a_failure_too():
    def broken(*args):
        raise RuntimeError('socket gone')
    with pytest.raises(LoadError, match='no answer \\(RuntimeError: socket gone\\)'):
        run_load(broken, 'h', 1, requests=2, concurrency=2)


def test_the_overall_timeout_bounds_the_load_and_each_request():
    server = FakeServer(delay=0.3)
    tic = time.monotonic()
    with pytest.raises(LoadError, match=r'did not finish in 0\.5 s'):
        run_load(server, 'h', 1, requests=100, concurrency=2, request_timeout=120, timeout=0.5)
    assert time.monotonic() - tic < 2
    assert all(call['timeout'] <= 0.5 for call in server.calls)


def test_no_output_token_at_all_fails():
    with pytest.raises(LoadError, match='no output tokens'):
        run_load(FakeServer(tokens=0), 'h', 1, requests=2, concurrency=1)


@pytest.mark.parametrize('text,tokens', [
    (answer(7), 7), (json.dumps([json.loads(answer(2))]), 2), ('{"meta_info": {"completion_tokens": true}}', None),
    ('not json', None), ('{"meta_info": {"completion_tokens": -1}}', None), ('[]', None),
])
def test_completion_tokens(text, tokens):
    assert completion_tokens(text) == tokens


def test_baseline_sources_and_the_verdict():
    assert choose_baseline(96.1, 50.0) == (96.1, 'inventory')
    assert choose_baseline(0, 50.0) == (50.0, 'host')
    assert choose_baseline(0, None) == (None, 'none')
    assert judge(100.0, None, 'none', 0.8) == (None, True, None)
    assert judge(80.0, 100.0, 'host', 0.8) == (0.8, True, None)
    observed, passed, message = judge(19.2, 96.1, 'inventory', 0.8)
    assert observed == pytest.approx(0.1998, abs=1e-4) and passed is False
    assert message == ('throughput 19.2 tok/s is 0.20 of the baseline 96.1 tok/s (inventory), below the ratio 0.8;'
                       ' the new stack is slower: roll back or set sglang_server_throughput_baseline')


def test_the_host_baseline_file(tmp_path):
    path = str(tmp_path / 'throughput-baseline.json')
    assert host_baseline(path) is None
    with open(path, 'w') as handle:
        json.dump({'tokens_per_second': 42.5}, handle)
    assert host_baseline(path) == 42.5
    for text, needle in (('{"tokens_per_second": 0}', 'no positive tokens_per_second (0)'),
                         ('[1]', 'not a JSON object'), ('{', 'not readable JSON')):
        with open(path, 'w') as handle:
            handle.write(text)
        with pytest.raises(ValueError) as info:
            host_baseline(path)
        assert needle in str(info.value) and path in str(info.value)
        assert 'sglang_server_throughput_baseline' in str(info.value)


def read(path):
    with open(path) as handle:
        return json.load(handle)


def measured(tokens_per_second):
    return lambda: {'output_tokens': 100, 'seconds': 100 / tokens_per_second, 'tokens_per_second': tokens_per_second}


def now():
    return '2026-03-01T12:00:00Z'


def test_no_baseline_passes_and_records_the_measurement(tmp_path):
    state = str(tmp_path)
    result, failure = throughput_gate(measured(50.0), state, revision='r1', release='/opt/rel/a', now=now)
    assert failure is None and result['passed'] and result['recorded_baseline'] and result['changed']
    assert result['baseline'] is None and result['baseline_source'] == 'none' and result['ratio'] is None
    assert read(os.path.join(state, 'throughput-baseline.json')) == {
        'tokens_per_second': 50.0, 'measured_at': '2026-03-01T12:00:00Z', 'revision': 'r1', 'release': '/opt/rel/a',
        'source': 'measured'}
    assert read(os.path.join(state, 'throughput-last.json')) == {
        'tokens_per_second': 50.0, 'measured_at': '2026-03-01T12:00:00Z', 'baseline': None, 'baseline_source': 'none',
        'ratio': None, 'passed': True, 'revision': 'r1', 'release': '/opt/rel/a'}
    assert oct(os.stat(os.path.join(state, 'throughput-last.json')).st_mode & 0o777) == '0o644'
    assert sorted(os.listdir(state)) == ['throughput-baseline.json', 'throughput-last.json']  # no temporary left

    # The next measurement is judged against the recorded one, which stays as it was.
    result, failure = throughput_gate(measured(30.0), state, revision='r2', now=now)
    assert result['baseline_source'] == 'host' and result['baseline'] == 50.0 and result['ratio'] == 0.6
    assert not result['passed'] and not result['recorded_baseline'] and '(host), below the ratio 0.8' in failure
    assert read(os.path.join(state, 'throughput-baseline.json'))['tokens_per_second'] == 50.0
    last = read(os.path.join(state, 'throughput-last.json'))
    assert last['passed'] is False and last['ratio'] == 0.6 and last['revision'] == 'r2' and last['release'] == ''


def test_the_inventory_baseline_wins_and_is_never_recorded(tmp_path):
    state = str(tmp_path)
    with open(os.path.join(state, 'throughput-baseline.json'), 'w') as handle:
        handle.write('{broken')  # not even read when the inventory gives one
    result, failure = throughput_gate(measured(90.0), state, baseline=100.0, ratio=0.9, now=now)
    assert failure is None and result['baseline_source'] == 'inventory' and result['ratio'] == 0.9
    assert not result['recorded_baseline']
    with open(os.path.join(state, 'throughput-baseline.json')) as handle:
        assert handle.read() == '{broken'


def test_record_baseline_false_records_nothing(tmp_path):
    result, dummy = throughput_gate(measured(50.0), str(tmp_path), record_baseline=False, now=now)
    assert result['passed'] and not result['recorded_baseline']
    assert os.listdir(str(tmp_path)) == ['throughput-last.json']


def test_check_mode_measures_and_writes_nothing(tmp_path):
    written = []
    result, failure = throughput_gate(measured(50.0), str(tmp_path), check_mode=True, now=now,
                                      write=lambda path, data: written.append(path))
    assert result['tokens_per_second'] == 50.0 and result['recorded_baseline'] and failure is None
    assert written == [] and os.listdir(str(tmp_path)) == []


def test_a_failed_load_writes_nothing(tmp_path):
    def load():
        raise LoadError('POST /generate (request 1 of 16): HTTP 500 boom')
    with pytest.raises(LoadError):
        throughput_gate(load, str(tmp_path))
    assert os.listdir(str(tmp_path)) == []


def test_the_default_prompt_and_files():
    assert sglang_load.BASELINE_FILE == 'throughput-baseline.json' and sglang_load.LAST_FILE == 'throughput-last.json'
    assert sglang_load.request_body('p', 4)['sampling_params']['ignore_eos'] is True
