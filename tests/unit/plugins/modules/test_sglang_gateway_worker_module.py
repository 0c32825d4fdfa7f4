# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway worker module in-process: its arguments, and whole runs against a real local HTTP server that
answers as smg 1.13.0 and the SGLang node did when recorded (tests/unit/fixtures/gateway/)."""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import yaml

from module_harness import assert_options_match_spec, invoke, patch_exits, record_argument_spec

from ansible_collections.inferops.gpu.plugins.modules import sglang_gateway_worker

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'gateway')
KEY = 'gw-admin-secret-7'
# How long a removed worker stays listed as draining, and how long the node's requests go on after it is gone.
SETTLE = 0.3
TAIL = 0.3


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


class World:
    """The gateway's workers and one node's in-flight requests, shared with the handler thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.template = json.loads(recorded('worker_ready.json'))
        self.workers = []          # records, with '_gone_at' while draining
        self.pending = {}          # id -> (record, ready_at)
        self.requests = []         # end times of the node's in-flight requests
        self.loads = True          # the node has /v1/loads (else 404: a release older than the live count)
        self.live_metrics = False  # /metrics shows the requests (as a fresh sample would)
        self.calls = []
        self.node_url = None

    def record(self, url, status='ready', healthy=True):
        record = dict(self.template, id=str(uuid.uuid4()), url=url, status=status, is_healthy=healthy)
        return record

    def tick(self):
        now = time.monotonic()
        for worker_id, (record, ready_at) in list(self.pending.items()):
            if now >= ready_at:
                del self.pending[worker_id]
                self.workers.append(record)
        self.workers = [w for w in self.workers if w.get('_gone_at') is None or w['_gone_at'] > now]
        self.requests = [end for end in self.requests if end > now]

    @staticmethod
    def public(record):
        return {key: value for key, value in record.items() if not key.startswith('_')}


class Handler(BaseHTTPRequestHandler):
    world = None

    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type='application/json'):
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self, method):
        world = self.world
        length = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(length).decode() if length else ''
        with world.lock:
            world.tick()
            world.calls.append((method, self.path, body))
            if self.path == '/metrics':
                # The gauges are samples (sglang samples them on a prefill, every 40th decode step, idle after
                # 30 s): the node's requests started after the last sample, so /metrics says 0 throughout.
                count = len(world.requests) if world.live_metrics else 0
                text = recorded('metrics_idle.txt').replace(
                    'sglang:num_queue_reqs{model_name="/tmp/gwh/model"} 0.0',
                    'sglang:num_queue_reqs{model_name="/tmp/gwh/model"} %.1f' % count)
                return self.answer(200, text, 'text/plain; version=0.0.4; charset=utf-8')
            if self.path == '/v1/loads?include=core':
                if not world.loads:
                    return self.answer(404, {'detail': 'Not Found'})
                # sglang 0.5.9's shape (entrypoints/v1_loads.py): the schedulers' live counts.
                count = len(world.requests)
                load = {'dp_rank': 0, 'num_running_reqs': count, 'num_waiting_reqs': 0, 'num_total_reqs': count}
                return self.answer(200, {'timestamp': '2026-12-04T10:00:00+00:00', 'version': '0.5.9',
                                         'dp_rank_count': 1, 'loads': [load],
                                         'aggregate': {'total_running_reqs': count, 'total_waiting_reqs': 0}})
            auth = self.headers.get('Authorization')
            if auth is None:
                return self.answer(401, recorded('unauthorized_missing.txt'), 'text/plain; charset=utf-8')
            if auth != 'Bearer %s' % KEY:
                return self.answer(401, recorded('unauthorized_invalid.txt'), 'text/plain; charset=utf-8')
            if self.path == '/workers' and method == 'GET':
                workers = [world.public(w) for w in world.workers]
                return self.answer(200, {'workers': workers, 'total': len(workers),
                                         'stats': {'prefill_count': 0, 'decode_count': 0,
                                                   'regular_count': len(workers)}})
            if self.path == '/workers' and method == 'POST':
                if self.headers.get('Content-Type') != 'application/json':
                    return self.answer(400, {'error': 'Missing Content-Type: application/json header',
                                             'code': 'BAD_REQUEST'})
                url = json.loads(body)['url']
                for w in world.workers:
                    if w['url'] == url:
                        return self.answer(409, {'error': "Worker already exists at URL '%s' with ID %s." % (
                            url, w['id']), 'code': 'WORKER_ALREADY_EXISTS'})
                record = world.record(url)
                world.pending[record['id']] = (record, time.monotonic() + 0.2)
                return self.answer(202, {'status': 'accepted', 'worker_id': record['id'], 'url': url,
                                         'location': '/workers/%s' % record['id'],
                                         'message': 'Worker addition queued for background processing'})
            found = re.match(r'^/workers/([^/]+)$', self.path)
            if found:
                worker_id = found.group(1)
                mine = [w for w in world.workers if w['id'] == worker_id]
                if method == 'GET':
                    if worker_id in world.pending:
                        pending = json.loads(recorded('worker_pending.json'))
                        pending.update(id=worker_id, url=world.pending[worker_id][0]['url'])
                        return self.answer(200, pending)
                    if mine:
                        return self.answer(200, world.public(mine[0]))
                if method == 'DELETE' and mine:
                    # smg drops every record of the URL, and the node keeps its requests going a while.
                    for w in world.workers:
                        if w['url'].rstrip('/') == mine[0]['url'].rstrip('/'):
                            w.update(status='draining', is_healthy=False, _gone_at=time.monotonic() + SETTLE)
                    world.requests = [time.monotonic() + SETTLE + TAIL] * 2
                    return self.answer(202, {'status': 'accepted', 'worker_id': worker_id,
                                             'message': 'Worker removal queued for background processing'})
                return self.answer(404, {'error': 'Worker %s not found' % worker_id, 'code': 'WORKER_NOT_FOUND'})
            return self.answer(404, '{"detail": "Not Found"}')

    def do_GET(self):
        self.handle_any('GET')

    def do_POST(self):
        self.handle_any('POST')

    def do_DELETE(self):
        self.handle_any('DELETE')


@pytest.fixture
def gateway(monkeypatch, tmp_path):
    """A gateway with two ready workers; the node under test (this server's own URL) serves /metrics."""
    patch_exits(monkeypatch)
    world = World()
    handler = type('BoundHandler', (Handler,), {'world': world})
    server = HTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    base = 'http://127.0.0.1:%d' % server.server_address[1]
    world.node_url = base
    world.workers = [world.record(base), world.record('http://127.0.0.1:1/other')]
    key_file = tmp_path / 'gateway.key'
    key_file.write_text('  %s\n' % KEY)

    def run(**options):
        args = {'gateway_url': base, 'api_key_file': str(key_file), 'worker_url': base + '/', 'poll_interval': 0.05,
                'drain_timeout': 10, 'healthy_timeout': 10, 'timeout': 5}
        args.update(options)
        # None drops an option (AnsibleModule counts a key given as None as given)
        return invoke(sglang_gateway_worker, {key: value for key, value in args.items() if value is not None})

    yield {'run': run, 'world': world, 'url': base, 'key_file': key_file}
    server.shutdown()
    server.server_close()


def test_drain_then_add_back_against_a_real_http_server(gateway):
    world, run, url = gateway['world'], gateway['run'], gateway['url']

    queried = run(state='query')
    assert not queried.get('failed'), queried
    assert queried['in_rotation'] and queried['registered'] and queried['in_flight'] == 0 and not queried['changed']

    check = run(state='absent', _ansible_check_mode=True)
    assert check['changed'] and not check.get('failed') and check['in_rotation'], check
    assert [c for c in world.calls if c[0] == 'DELETE'] == []

    started = time.monotonic()
    drained = run(state='absent')
    assert not drained.get('failed'), drained
    assert drained['changed'] and not drained['in_rotation'] and drained['worker'] is None
    assert drained['in_flight'] == 0 and drained['healthy_workers'] == 1
    # the gateway dropped it after SETTLE, the node's requests ended TAIL later
    assert time.monotonic() - started >= SETTLE + TAIL and drained['waited'] >= SETTLE + TAIL - 0.05
    assert 'took %s out of the gateway\'s rotation (1 healthy worker(s) left); nothing in flight' % url in drained['msg']
    assert KEY not in repr(drained)

    again = run(state='absent')
    assert not again.get('failed') and not again['changed'], again
    assert 'is not registered with the gateway (no change' in again['msg']

    check = run(state='present', _ansible_check_mode=True)
    assert check['changed'] and not [c for c in world.calls if c[0] == 'POST']

    added = run(state='present', api_key=KEY, api_key_file=None)
    assert not added.get('failed'), added
    assert added['changed'] and added['in_rotation'] and added['worker']['url'] == url and added['healthy_workers'] == 2
    posts = [json.loads(c[2]) for c in world.calls if c[0] == 'POST']
    assert posts == [{'url': url}]  # without the trailing slash of worker_url
    pending_polls = [c for c in world.calls if c[0] == 'GET' and c[1].startswith('/workers/')]
    assert pending_polls, 'the registration under way is read from GET /workers/ID'

    same = run(state='present')
    assert not same.get('failed') and not same['changed'] and same['waited'] < 1, same


def test_without_v1_loads_the_drain_reads_the_metrics(gateway):
    world, run = gateway['world'], gateway['run']
    world.loads, world.live_metrics = False, True
    started = time.monotonic()
    drained = run(state='absent')
    assert not drained.get('failed') and drained['in_flight'] == 0, drained
    assert time.monotonic() - started >= SETTLE + TAIL
    assert [c[1] for c in world.calls if c[1].startswith('/v1/loads')] == ['/v1/loads?include=core']  # asked once
    assert [c for c in world.calls if c[1] == '/metrics']


def test_the_drain_waits_for_min_in_rotation(gateway):
    result = gateway['run'](state='absent', min_in_rotation=2)
    assert result['failed'] and not result['changed']
    assert result['msg'] == ('refusing to take %s out of rotation: 1 other healthy worker(s) of 2 listed would stay,'
                             ' fewer than min_in_rotation 2' % gateway['url'])


def test_a_refused_key_is_reported_and_never_printed(gateway):
    gateway['key_file'].write_text('wrong-key-1\n')
    result = gateway['run'](state='query')
    assert result['failed'] and 'refused the API key (HTTP 401' in result['msg']
    assert 'wrong-key-1' not in repr(result)


def test_an_unreachable_gateway_is_named(gateway):
    result = gateway['run'](state='present', gateway_url='http://127.0.0.1:1')
    assert result['failed'] and result['msg'].startswith('cannot reach the gateway at http://127.0.0.1:1 (GET ')


@pytest.mark.parametrize('options, message', [
    ({'api_key': KEY}, 'parameters are mutually exclusive: api_key|api_key_file'),
    ({'api_key_file': None}, 'one of the following is required: api_key, api_key_file'),
    ({'state': 'drained'}, 'value of state must be one of: present, absent, query, got: drained'),
    ({'gateway_url': 'gateway:30080', 'drain_timeout': -1, 'poll_interval': 0},
     'gateway_url must be an http:// or https:// URL without spaces or control characters (got "gateway:30080");'
     ' drain_timeout must be at least 0 (got -1); poll_interval must be above 0 (got 0.0)'),
    # The worker's URL is sent and compared as written: shell text, a path or no port make no worker of it.
    ({'worker_url': 'http://x y:1/v1;rm'},
     'worker_url must be http://host:port or https://host:port: a host name or IPv4 address (letters, digits and . _ -)'
     ' or an IPv6 address in brackets, a port from 1 to 65535 and no path (a trailing / at most), such as'
     ' http://10.0.0.11:30000 (got "http://x y:1/v1;rm")'),
    ({'worker_url': 'http://127.0.0.1:70000', 'metrics_url': 'http://127.0.0.1:1/metrics\nX: 1'},
     'metrics_url must be an http:// or https:// URL without spaces or control characters (got'
     ' "http://127.0.0.1:1/metrics\\nX: 1"); worker_url must be http://host:port'),
    ({'gateway_url': 'http://admin:pw@gw x:30080'},
     'gateway_url must be an http:// or https:// URL without spaces or control characters (got "http://***@gw x:30080")'),
])
def test_argument_errors(gateway, options, message):
    result = gateway['run'](**options)
    assert result['failed'] and message in result['msg'], result
    assert not gateway['world'].calls


def test_an_unreadable_or_empty_key_file(gateway, tmp_path):
    result = gateway['run'](api_key_file=str(tmp_path / 'missing.key'))
    assert result['failed'] and result['msg'].startswith('cannot read api_key_file %s' % (tmp_path / 'missing.key'))
    gateway['key_file'].write_text('\n')
    result = gateway['run']()
    assert result['failed'] and result['msg'] == 'the control-plane API key is empty (api_key_file %s)' % gateway['key_file']
    assert not gateway['world'].calls


def test_documentation_matches_the_argument_spec_and_the_results(gateway, monkeypatch):
    seen = record_argument_spec(monkeypatch, sglang_gateway_worker)
    result = gateway['run'](state='query')
    options = assert_options_match_spec(sglang_gateway_worker, seen)
    assert options['api_key']['type'] == 'str' and seen['argument_spec']['api_key']['no_log'] is True
    assert seen['argument_spec']['worker_api_key']['no_log'] is True
    returns = yaml.safe_load(sglang_gateway_worker.RETURN)
    assert set(result) - {'changed', 'msg', 'invocation'} == set(returns)
    for name, doc in returns.items():
        if result[name] is not None:
            assert type(result[name]).__name__ == doc['type'], name
    yaml.safe_load(sglang_gateway_worker.EXAMPLES)
