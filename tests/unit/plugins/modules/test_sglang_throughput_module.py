# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The throughput module end to end, in-process, against the real SGLang stand-in (tests/fixtures/sglang_standin)
started by the sglang_server module's `process` manager: real processes, real HTTP, real files."""

from __future__ import annotations

import json
import os
import sys

import pytest
import yaml

from module_harness import (
    SGLANG_STANDIN, assert_documented, assert_options_match_spec, invoke, patch_exits, record_argument_spec,
)
from ports import free_port

from ansible_collections.inferops.gpu.plugins.modules import sglang_server, sglang_throughput

STANDIN = SGLANG_STANDIN
KEY = 'sk-throughput-secret-9'
# 8 requests of 8 tokens at 5 ms a token: about 0.35 s healthy, five times that with the `slow` fault.
LOAD = {'requests': 8, 'concurrency': 4, 'max_new_tokens': 8, 'request_timeout': 30, 'timeout': 60}


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A ready stand-in with an API key; run(**options) calls the throughput module against it."""
    patch_exits(monkeypatch)
    port = free_port()
    model = tmp_path / 'model'
    model.mkdir()
    (tmp_path / 'log').mkdir()
    state_dir = tmp_path / 'state'
    state_dir.mkdir()
    config = tmp_path / 'server.yaml'
    config.write_text('api-key: %s\n' % KEY)
    base = {
        'manager': 'process', 'log_path': str(tmp_path / 'log' / 'server.log'), 'port': port, 'api_key': KEY,
        'command': [sys.executable, '-m', 'sglang.launch_server', '--model-path', str(model), '--port', str(port),
                    '--config', str(config)],
        'environment': {'PYTHONPATH': os.path.abspath(STANDIN), 'SGLANG_STANDIN_LOAD_SECONDS': '0.3',
                        'SGLANG_STANDIN_DRAIN_POLL_SECONDS': '0.2',
                        'SGLANG_STANDIN_WARMUP_SECONDS': '0.2', 'SGLANG_STANDIN_GPU': '0',
                        'SGLANG_STANDIN_TOKEN_SECONDS': '0.005',
                        'SGLANG_STANDIN_FAULT_FILE': str(tmp_path / 'fault')},
        'stall_timeout': 20, 'timeout': 60,
    }

    def start(state='started'):
        result = invoke(sglang_server, dict(base, state=state))
        assert result.get('ready'), result
        return result

    def run(**options):
        args = dict(LOAD, port=port, api_key=KEY, state_dir=str(state_dir), revision='rev-1',
                    release='/opt/ml-env-releases/a')
        args.update(options)
        return invoke(sglang_throughput, args)

    start()
    yield {'run': run, 'start': start, 'tmp': tmp_path, 'state_dir': state_dir, 'port': port}
    invoke(sglang_server, dict(base, state='stopped'))


def files(state_dir):
    return sorted(os.listdir(str(state_dir)))


def read(path):
    with open(str(path)) as handle:
        return json.load(handle)


def test_healthy_without_a_baseline_records_it_and_then_passes_against_it(server):
    first = server['run']()
    assert not first.get('failed'), first
    assert first['changed'] and first['passed'] and first['recorded_baseline']
    assert first['baseline'] is None and first['baseline_source'] == 'none' and first['ratio'] is None
    assert first['output_tokens'] == 64 and first['requests'] == 8 and first['concurrency'] == 4
    assert first['tokens_per_second'] == pytest.approx(64 / first['seconds'], rel=0.02)
    assert KEY not in repr(first)
    baseline = read(server['state_dir'] / 'throughput-baseline.json')
    assert baseline['tokens_per_second'] == first['tokens_per_second'] and baseline['source'] == 'measured'
    assert baseline['revision'] == 'rev-1' and baseline['release'] == '/opt/ml-env-releases/a'
    assert baseline['measured_at'].endswith('Z')
    assert read(server['state_dir'] / 'throughput-last.json')['baseline_source'] == 'none'

    second = server['run'](ratio=0.3)  # the same healthy stack against its own baseline
    assert not second.get('failed'), second
    assert second['baseline_source'] == 'host' and second['baseline'] == first['tokens_per_second']
    assert second['passed'] and not second['recorded_baseline'] and second['ratio'] > 0.3
    last = read(server['state_dir'] / 'throughput-last.json')
    assert last['passed'] is True and last['baseline_source'] == 'host' and last['ratio'] == second['ratio']


def test_a_slower_stack_fails_against_the_baseline_measured_first(server):
    healthy = server['run']()
    assert healthy['recorded_baseline'], healthy
    (server['tmp'] / 'fault').write_text('slow\n')
    server['start']('restarted')  # health and the gate see nothing wrong with it
    slow = server['run']()
    assert slow['failed'] and slow['passed'] is False and slow['baseline_source'] == 'host'
    assert slow['ratio'] < 0.5, slow
    assert 'of the baseline %.1f tok/s (host), below the ratio 0.8; the new stack is slower' % healthy[
        'tokens_per_second'] in slow['msg']
    assert 'roll back or set sglang_server_throughput_baseline' in slow['msg']
    last = read(server['state_dir'] / 'throughput-last.json')
    assert last['passed'] is False and last['ratio'] == slow['ratio']
    assert read(server['state_dir'] / 'throughput-baseline.json')['tokens_per_second'] == healthy['tokens_per_second']

    # An inventory baseline wins over the host's and is named as the source.
    inventory = server['run'](baseline=healthy['tokens_per_second'] * 1.1, requests=2)
    assert inventory['failed'] and '(inventory)' in inventory['msg'] and inventory['baseline_source'] == 'inventory'


def test_check_mode_measures_and_writes_nothing(server):
    result = server['run'](_ansible_check_mode=True)
    assert not result.get('failed'), result
    assert result['output_tokens'] == 64 and result['passed'] and result['recorded_baseline']
    assert files(server['state_dir']) == []
    # A first run in check mode has not created the directory: nothing to read, nothing to write.
    missing = server['run'](_ansible_check_mode=True, state_dir=str(server['tmp'] / 'not-yet'), requests=2)
    assert not missing.get('failed'), missing
    assert not os.path.exists(str(server['tmp'] / 'not-yet'))


def test_a_wrong_key_fails_naming_the_status_and_writes_nothing(server):
    result = server['run'](api_key='wrong')
    assert result['failed'] and 'HTTP 401' in result['msg'] and 'Unauthorized' in result['msg']
    assert files(server['state_dir']) == []


def test_no_server_fails_naming_the_missing_answer(server):
    result = server['run'](port=free_port(), requests=2)
    assert result['failed'] and 'no answer' in result['msg'] and 'Connection refused' in result['msg']
    assert result['msg'].startswith('POST /generate (request ') and ' of 2)' in result['msg']


@pytest.mark.parametrize('overrides,expect', [
    ({'ratio': 0}, 'ratio must be above 0 and at most 1 (got 0.0)'),
    ({'ratio': 1.5}, 'ratio must be above 0 and at most 1 (got 1.5)'),
    ({'baseline': -1}, 'baseline must be 0 (none given) or above (got -1.0)'),
    ({'concurrency': 0, 'requests': 0}, 'concurrency must be at least 1 (got 0); requests must be at least 1'),
    ({'timeout': 0}, 'timeout must be above 0'),
    ({'state_dir': '/nonexistent/state'}, 'state_dir /nonexistent/state is not a directory'),
])
def test_bad_options_fail_before_any_request(tmp_path, monkeypatch, overrides, expect):
    patch_exits(monkeypatch)
    args = dict(LOAD, port=free_port(), state_dir=str(tmp_path))  # nothing listens there: no request may be sent
    args.update(overrides)
    result = invoke(sglang_throughput, args)
    assert result['failed'] and expect in result['msg'] and result['changed'] is False
    assert 'output_tokens' not in result


def test_documentation_matches_the_argument_spec_and_the_result(server, monkeypatch):
    seen = record_argument_spec(monkeypatch, sglang_throughput)
    result = server['run']()
    assert_options_match_spec(sglang_throughput, seen)
    assert seen['argument_spec']['api_key']['no_log'] is True
    returns = yaml.safe_load(sglang_throughput.RETURN)
    assert set(result) - {'changed', 'invocation'} == set(returns)
    for key in returns:
        if result[key] is not None:
            assert_documented(result[key], returns[key], key)
    failed = server['run'](baseline=result['tokens_per_second'] * 100)
    assert set(failed) - {'changed', 'invocation', 'failed', 'msg'} == set(returns)
    for example in yaml.safe_load(sglang_throughput.EXAMPLES):
        assert set(example['inferops.gpu.sglang_throughput']) <= set(seen['argument_spec'])
