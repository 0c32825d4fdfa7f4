# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway worker's logic driven by answers recorded from smg 1.13.0 and the SGLang stand-in
(tests/unit/fixtures/gateway/README.md), through a fake transport and a fake clock."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.gateway import (
    Gateway, GatewayError, NodeMetrics, WorkerState, find, healthy_count, in_flight, is_worker_url, normalise_url,
    parse_prometheus, worker_url_problem,
)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'gateway')
GW = 'http://127.0.0.1:30180'
KEY = 'SECRET-admin-key-42'
NODE = 'http://127.0.0.1:31105'
NODE_ID = '01a2301a-96c0-76e5-ac34-19c8c5293616'
NODE_31101 = 'http://127.0.0.1:31101'
REFUSED = '[Errno 111] Connection refused'


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def workers_of(name):
    return json.loads(recorded(name))['workers']


class Clock:
    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


class FakeHttp:
    """Answers from scripted queues per (method, URL); the last answer of a queue repeats. Every call recorded."""

    def __init__(self, clock, routes):
        self.clock = clock
        self.routes = {key: list(value) for key, value in routes.items()}
        self.calls = []

    def __call__(self, method, url, headers, body, timeout):
        self.calls.append((method, url, headers, body, timeout, self.clock.now))
        queue = self.routes.get((method, url))
        if queue is None:
            return 404, '{"detail": "Not Found"}', None
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return answer(method, url, headers, body) if callable(answer) else answer

    def seen(self, method=None):
        return [(call[0], call[1]) for call in self.calls if method is None or call[0] == method]


def ok(name, status=200):
    return (status, recorded(name), None)


def state(routes, check_mode=False, **options):
    clock = Clock()
    fake = FakeHttp(clock, routes)
    settings = dict(drain_timeout=60, healthy_timeout=30, min_in_rotation=1, poll_interval=1.0)
    settings.update(options)
    worker_url = settings.pop('worker_url', NODE)
    gateway = Gateway(fake, GW + '/', KEY, timeout=7)
    metrics = NodeMetrics(fake, worker_url.rstrip('/') + '/metrics', timeout=7)
    worker = WorkerState(gateway, metrics, worker_url, check_mode=check_mode, clock=clock, sleep=clock.sleep, **settings)
    return worker, fake, clock


# -- parsing ----------------------------------------------------------------------------------

def test_in_flight_of_the_recorded_metrics_texts():
    assert in_flight(recorded('metrics_busy.txt')) == {'in_flight': 5, 'running': 1, 'queued': 4}
    assert in_flight(recorded('metrics_removed_busy.txt')) == {'in_flight': 3, 'running': 1, 'queued': 2}
    assert in_flight(recorded('metrics_idle.txt')) == {'in_flight': 0, 'running': 0, 'queued': 0}


def test_prometheus_text_with_labels_comments_timestamps_and_several_samples():
    # Written by hand in the exposition format (sglang labels its gauges per engine and rank).
    text = '\n'.join([
        '# HELP sglang:num_running_reqs The number of running requests.',
        '# TYPE sglang:num_running_reqs gauge',
        'sglang:num_running_reqs{model_name="m, \\"x\\" {1}",engine_type="unified",tp_rank="0",pp_rank="0"} 2.0',
        'sglang:num_running_reqs{model_name="m",tp_rank="1",} 1 1700000000000',
        'sglang:num_running_reqs_total{model_name="m"} 99',
        'sglang:num_queue_reqs 3e0',
        'sglang:num_queue_reqs{tp_rank="1"} NaN',
        '',
        'not a sample line at all {',
    ])
    samples = parse_prometheus(text)
    assert samples[0] == ('sglang:num_running_reqs', {'model_name': 'm, "x" {1}', 'engine_type': 'unified',
                                                      'tp_rank': '0', 'pp_rank': '0'}, 2.0)
    assert samples[1] == ('sglang:num_running_reqs', {'model_name': 'm', 'tp_rank': '1'}, 1.0)
    assert in_flight(text) == {'in_flight': 6, 'running': 3, 'queued': 3}
    with pytest.raises(ValueError):
        in_flight('# HELP nothing\nsglang:token_usage{model_name="m"} 0.0\n')


def test_workers_are_found_by_url_without_the_trailing_slash():
    records = workers_of('workers_duplicate_slash.json')
    assert len(find(records, NODE_31101)) == 2 and len(find(records, NODE_31101 + '/')) == 2
    assert find(records, 'http://127.0.0.1:31109') == []
    assert normalise_url(' http://h:1// ') == 'http://h:1'
    assert healthy_count(workers_of('workers_one_unhealthy.json')) == 2
    assert healthy_count(workers_of('workers_draining.json'), exclude_url=NODE_31101) == 2


# -- the gateway's answers ---------------------------------------------------------------------

def test_401_says_the_key_was_refused_without_printing_it():
    worker, dummy, dummy2 = state({('GET', GW + '/workers'): [ok('unauthorized_invalid.txt', 401)]})
    result, failure = worker.run('query')
    assert failure == ('the gateway at %s refused the API key (HTTP 401 on GET %s/workers: Invalid authentication'
                       ' token)' % (GW, GW))
    assert KEY not in repr(result) and result['changed'] is False and result['healthy_workers'] is None


def test_a_key_the_gateway_echoes_is_masked():
    worker, dummy, dummy2 = state({('GET', GW + '/workers'): [(500, 'bad key %s here' % KEY, None)]})
    result, failure = worker.run('query')
    assert failure == 'unexpected answer from the gateway to GET %s/workers: HTTP 500 bad key ******** here' % GW
    assert KEY not in repr(result)


def test_403_of_a_user_role_key_names_the_admin_role():
    routes = {('GET', GW + '/workers'): [ok('workers_four_ready.json')],
              ('DELETE', GW + '/workers/' + NODE_ID): [ok('forbidden_user_role.txt', 403)]}
    worker, dummy, dummy2 = state(routes)
    result, failure = worker.run('absent')
    assert 'HTTP 403: Admin role required for this control plane operation' in failure
    assert 'needs a control-plane key of the admin role' in failure
    assert result['changed'] is True and result['registered'] is True


def test_an_unreachable_gateway_is_named():
    worker, dummy, dummy2 = state({('GET', GW + '/workers'): [(None, '', REFUSED)]})
    result, failure = worker.run('present')
    assert failure == 'cannot reach the gateway at %s (GET %s/workers): %s' % (GW, GW, REFUSED)
    assert result['changed'] is False


def test_an_answer_without_a_workers_list_is_unexpected():
    worker, dummy, dummy2 = state({('GET', GW + '/workers'): [(200, '<html>proxy login</html>', None)]})
    dummy3, failure = worker.run('query')
    assert failure == 'unexpected answer from the gateway to GET %s/workers: HTTP 200, not JSON: <html>proxy login</html>' % GW
    worker, dummy, dummy2 = state({('GET', GW + '/workers'): [(200, '{"items": []}', None)]})
    assert 'no list of workers' in worker.run('query')[1]


def test_every_request_carries_the_key_and_the_timeout():
    worker, fake, dummy = state({('GET', GW + '/workers'): [ok('workers_four_ready.json')],
                                 ('GET', NODE + '/metrics'): [ok('metrics_idle.txt')]})
    result, failure = worker.run('query')
    assert failure is None and result['in_rotation'] and result['in_flight'] == 0
    assert [call[4] for call in fake.calls] == [7, 7]
    assert fake.calls[0][2]['Authorization'] == 'Bearer %s' % KEY
    assert 'Authorization' not in fake.calls[1][2]  # the node's metrics need no key


# -- absent: drain ------------------------------------------------------------------------------

def drain_routes(metrics):
    return {('GET', GW + '/workers'): [ok('workers_four_ready.json'), ok('workers_draining.json'),
                                       ok('workers_draining.json'), ok('workers_after_remove.json')],
            ('DELETE', GW + '/workers/' + NODE_ID): [ok('delete_202.json', 202)],
            ('GET', NODE + '/metrics'): metrics}


def test_drain_removes_waits_until_unlisted_and_then_for_in_flight_zero():
    worker, fake, clock = state(drain_routes([ok('metrics_removed_busy.txt'), ok('metrics_removed_busy.txt'),
                                              ok('metrics_idle.txt')]))
    result, failure = worker.run('absent')
    assert failure is None, failure
    assert fake.seen() == [('GET', GW + '/workers'), ('DELETE', GW + '/workers/' + NODE_ID)] + \
        [('GET', GW + '/workers')] * 3 + [('GET', NODE + '/metrics')] * 4
    assert result == {'changed': True, 'worker': None, 'in_rotation': False, 'registered': False,
                      'healthy_workers': 3, 'in_flight': 0, 'waited': 6.0, 'msg': result['msg']}
    assert result['msg'] == ('took %s out of the gateway\'s rotation (3 healthy worker(s) left); nothing in flight on'
                             ' the node after 6 s' % NODE)
    # Nothing in flight twice, a poll apart, ends the drain.
    assert clock.sleeps == [1.0] * 6


def test_a_node_that_refuses_connections_has_nothing_in_flight():
    worker, dummy, dummy2 = state(drain_routes([(None, '', REFUSED)]))
    result, failure = worker.run('absent')
    assert failure is None and result['in_flight'] == 0
    assert result['msg'].endswith('the node refuses connections, so nothing is in flight')


def test_drain_timeout_names_the_in_flight_count():
    worker, dummy, clock = state(drain_routes([ok('metrics_removed_busy.txt')]), drain_timeout=10, poll_interval=3)
    result, failure = worker.run('absent')
    assert failure == ('%s still has 3 request(s) in flight (running 1, queued 2) after 10 s (drain_timeout 10 s)'
                       % NODE)
    assert result['changed'] is True and result['in_flight'] == 3 and result['waited'] == 10.0
    assert clock.sleeps == [3, 3, 3, 1]  # the last one only up to the deadline


def test_drain_timeout_while_the_gateway_still_lists_it():
    routes = drain_routes([ok('metrics_idle.txt')])
    routes[('GET', GW + '/workers')] = [ok('workers_four_ready.json'), ok('workers_draining.json')]
    worker, fake, dummy = state(routes, drain_timeout=4)
    result, failure = worker.run('absent')
    assert failure == ('the gateway still lists %s (status draining, is_healthy false) 4 s after its removal'
                       ' (drain_timeout 4 s)' % NODE)
    assert result['registered'] is True and result['worker']['status'] == 'draining'
    assert ('GET', NODE + '/metrics') not in fake.seen()


def test_metrics_404_says_the_server_needs_enable_metrics():
    worker, dummy, dummy2 = state(drain_routes([ok('metrics_404_no_enable_metrics.json', 404)]))
    result, failure = worker.run('absent')
    assert failure == ('the node answers 404 at %s/metrics: the SGLang server needs --enable-metrics'
                       ' (sglang_server_enable_metrics: true) for its in-flight requests to be read' % NODE)
    assert result['changed'] is True


def test_min_in_rotation_refuses_before_anything_is_removed():
    # 31104 is not_ready: only 31102 would stay healthy besides 31101.
    routes = {('GET', GW + '/workers'): [ok('workers_one_unhealthy.json')]}
    worker, fake, dummy = state(routes, worker_url=NODE_31101, min_in_rotation=2)
    result, failure = worker.run('absent')
    assert failure == ('refusing to take %s out of rotation: 1 other healthy worker(s) of 3 listed would stay, fewer'
                       ' than min_in_rotation 2' % NODE_31101)
    assert fake.seen('DELETE') == [] and result['changed'] is False and result['in_rotation'] is True
    # The same in check mode: it would fail for real.
    worker, fake, dummy = state(routes, check_mode=True, worker_url=NODE_31101, min_in_rotation=2)
    assert worker.run('absent')[1] == failure


def test_every_record_of_the_url_is_removed():
    ids = [record['id'] for record in workers_of('workers_duplicate_slash.json') if '31101' in record['url']]
    routes = {('GET', GW + '/workers'): [ok('workers_duplicate_slash.json'), (200, '{"workers": []}', None)],
              ('GET', NODE_31101 + '/metrics'): [ok('metrics_idle.txt')]}
    for worker_id in ids:
        routes[('DELETE', GW + '/workers/' + worker_id)] = [ok('delete_202.json', 202)]
    worker, fake, dummy = state(routes, worker_url=NODE_31101 + '/', min_in_rotation=1)
    result, failure = worker.run('absent')
    assert failure is None and sorted(url for dummy2, url in fake.seen('DELETE')) == sorted(
        GW + '/workers/' + worker_id for worker_id in ids)


def test_absent_when_not_registered_changes_nothing_but_waits_for_in_flight_zero():
    routes = {('GET', GW + '/workers'): [ok('workers_after_remove.json')],
              ('GET', NODE + '/metrics'): [ok('metrics_removed_busy.txt'), ok('metrics_idle.txt')]}
    worker, fake, dummy = state(routes)
    result, failure = worker.run('absent')
    assert failure is None and result['changed'] is False and result['in_flight'] == 0 and result['waited'] == 2.0
    assert result['msg'] == ('%s is not registered with the gateway (no change; 3 healthy worker(s)); nothing in'
                             ' flight on the node after 2 s' % NODE)
    assert fake.seen('DELETE') == []


def test_absent_in_check_mode_deletes_nothing_and_does_not_wait():
    worker, fake, clock = state(drain_routes([ok('metrics_busy.txt')]), check_mode=True)
    result, failure = worker.run('absent')
    assert failure is None and result['changed'] is True and result['in_rotation'] is True
    assert fake.seen() == [('GET', GW + '/workers')] and clock.sleeps == []
    assert result['msg'].startswith('would take %s out of the gateway\'s rotation (3 other healthy' % NODE)
    routes = {('GET', GW + '/workers'): [ok('workers_after_remove.json')]}
    worker, fake, clock = state(routes, check_mode=True)
    result, failure = worker.run('absent')
    assert failure is None and result['changed'] is False and fake.seen() == [('GET', GW + '/workers')]


# -- present: add -------------------------------------------------------------------------------

ADDED_ID = json.loads(recorded('post_add_202.json'))['worker_id']


def add_routes(listings, pending):
    return {('GET', GW + '/workers'): listings,
            ('POST', GW + '/workers'): [ok('post_add_202.json', 202)],
            ('GET', GW + '/workers/' + ADDED_ID): pending}


def without_31101(name):
    data = json.loads(recorded(name))
    data['workers'] = [record for record in data['workers'] if '31101' not in record['url']]
    return (200, json.dumps(data), None)


def test_add_posts_and_waits_until_listed_healthy():
    listings = [without_31101('workers_four_ready.json'), without_31101('workers_four_ready.json'),
                ok('workers_four_ready.json')]
    worker, fake, dummy = state(add_routes(listings, [ok('worker_pending.json')]), worker_url=NODE_31101 + '/')
    result, failure = worker.run('present')
    assert failure is None, failure
    post = [call for call in fake.calls if call[0] == 'POST'][0]
    assert json.loads(post[3]) == {'url': NODE_31101} and post[2]['Content-Type'] == 'application/json'
    assert result['changed'] is True and result['in_rotation'] is True and result['healthy_workers'] == 4
    assert result['worker']['url'] == NODE_31101 and result['waited'] == 2.0
    assert result['msg'] == 'registered %s with the gateway; healthy after 2 s (4 healthy worker(s))' % NODE_31101


def test_add_sends_the_workers_own_api_key():
    listings = [without_31101('workers_four_ready.json'), ok('workers_four_ready.json')]
    worker, fake, dummy = state(add_routes(listings, [ok('worker_pending.json')]), worker_url=NODE_31101,
                                worker_api_key='WKEY')
    assert worker.run('present')[1] is None
    assert json.loads(fake.calls[1][3]) == {'url': NODE_31101, 'api_key': 'WKEY'}


def test_add_timeout_names_the_last_status_seen():
    listings = [without_31101('workers_four_ready.json')]
    worker, fake, dummy = state(add_routes(listings, [ok('worker_pending_api_key_refused.json')]),
                                worker_url=NODE_31101, healthy_timeout=5)
    result, failure = worker.run('present')
    assert failure.startswith('%s is not healthy in the gateway after 5 s (healthy_timeout 5 s); last status seen:'
                              ' status pending, is_healthy false (AddWorker job processing); the gateway keeps a'
                              ' worker pending' % NODE_31101)
    assert 'needs worker_api_key' in failure
    assert result['changed'] is True and result['in_rotation'] is False and len(fake.seen('POST')) == 1


def test_add_timeout_of_a_listed_unhealthy_worker():
    worker, fake, dummy = state({('GET', GW + '/workers'): [ok('workers_one_unhealthy.json')]},
                                worker_url='http://127.0.0.1:31104', healthy_timeout=3)
    result, failure = worker.run('present')
    assert failure == ('http://127.0.0.1:31104 is not healthy in the gateway after 3 s (healthy_timeout 3 s); last'
                       ' status seen: status not_ready, is_healthy false')
    assert fake.seen('POST') == [] and result['changed'] is False and result['registered'] is True


def test_a_registration_already_under_way_is_waited_for_not_repeated():
    listings = [without_31101('workers_four_ready.json'), ok('workers_four_ready.json')]
    routes = add_routes(listings, [ok('worker_pending.json')])
    in_progress = json.loads(recorded('post_409_in_progress.json'))
    in_progress['error'] = in_progress['error'].replace('01a23019-70d7-777e-b695-3e2233ba7c16', ADDED_ID)
    routes[('POST', GW + '/workers')] = [(409, json.dumps(in_progress), None)]
    worker, fake, dummy = state(routes, worker_url=NODE_31101)
    result, failure = worker.run('present')
    assert failure is None and result['changed'] is False and result['in_rotation'] is True
    assert ('GET', GW + '/workers/' + ADDED_ID) in fake.seen()
    assert result['msg'].startswith('%s joined the gateway; healthy after 1 s' % NODE_31101)


def test_present_is_idempotent():
    worker, fake, clock = state({('GET', GW + '/workers'): [ok('workers_four_ready.json')]}, worker_url=NODE_31101)
    result, failure = worker.run('present')
    assert failure is None and result['changed'] is False and fake.seen() == [('GET', GW + '/workers')]
    assert result['msg'] == '%s is in the gateway\'s rotation (4 healthy worker(s))' % NODE_31101
    assert clock.sleeps == []


def test_a_draining_worker_is_registered_again_once_it_is_gone():
    routes = add_routes([ok('workers_draining.json'), ok('workers_after_remove.json'), ok('workers_four_ready.json')],
                        [ok('worker_pending.json')])
    worker, fake, dummy = state(routes)
    result, failure = worker.run('present')
    assert failure is None and result['changed'] is True and len(fake.seen('POST')) == 1
    assert fake.seen().index(('POST', GW + '/workers')) == 2  # after the listing without it


def test_present_in_check_mode_posts_nothing():
    worker, fake, clock = state({('GET', GW + '/workers'): [without_31101('workers_four_ready.json')]},
                                check_mode=True, worker_url=NODE_31101)
    result, failure = worker.run('present')
    assert failure is None and result['changed'] is True and fake.seen('POST') == [] and clock.sleeps == []
    assert result['msg'] == 'would register %s with the gateway and wait until it is healthy' % NODE_31101
    worker, fake, clock = state({('GET', GW + '/workers'): [ok('workers_one_unhealthy.json')]}, check_mode=True,
                                worker_url='http://127.0.0.1:31104')
    result, failure = worker.run('present')
    assert failure is None and result['changed'] is False and 'not healthy (status not_ready' in result['msg']


def test_query_reports_without_changing():
    routes = {('GET', GW + '/workers'): [ok('workers_draining.json')],
              ('GET', NODE + '/metrics'): [ok('metrics_busy.txt')]}
    worker, fake, dummy = state(routes)
    result, failure = worker.run('query')
    assert failure is None and result['changed'] is False and result['registered'] and not result['in_rotation']
    assert result['in_flight'] == 5 and result['healthy_workers'] == 3
    assert result['msg'] == ('%s is registered with the gateway (status draining, is_healthy false; 3 healthy'
                             ' worker(s)); 5 request(s) in flight' % NODE)
    routes[('GET', NODE + '/metrics')] = [ok('metrics_404_no_enable_metrics.json', 404)]
    result, failure = state(routes)[0].run('query')
    assert failure is None and result['in_flight'] is None and 'in-flight requests unknown' in result['msg']


def test_gateway_register_and_remove_outcomes():
    clock = Clock()
    fake = FakeHttp(clock, {('POST', GW + '/workers'): [ok('post_409_exists.json', 409)],
                            ('DELETE', GW + '/workers/x'): [ok('delete_404.json', 404)]})
    gateway = Gateway(fake, GW, KEY)
    assert gateway.register(NODE_31101) == ('exists', '01a23019-fced-7045-93ae-d85dc351a3e6')
    assert gateway.remove('x') is False
    fake.routes[('POST', GW + '/workers')] = [ok('worker_bad_id_400.json', 400)]
    with pytest.raises(GatewayError, match='unexpected answer from the gateway to POST .*/workers: HTTP 400'):
        gateway.register(NODE_31101)


# -- the worker URL -----------------------------------------------------------------------------

@pytest.mark.parametrize('url', [NODE, NODE + '/', 'https://node-1.example.invalid:443', 'http://node_2:1',
                                 'http://[fd00::11]:30000', 'http://[::1]:65535/'])
def test_worker_urls_accepted(url):
    assert is_worker_url(url) and worker_url_problem(url) is None


@pytest.mark.parametrize('url', [
    'http://x y:1/v1;rm',                       # a space, a path, shell text
    'http://10.0.0.11:30000;rm -rf /',
    'http://10.0.0.11:30000/v1',                # a path
    'http://10.0.0.11:30000/?a=1',
    'http://10.0.0.11:30000#x',
    'http://10.0.0.11',                         # no port: 80, where no server listens
    'http://10.0.0.11:0', 'http://10.0.0.11:70000', 'http://10.0.0.11:030000', 'http://10.0.0.11:-1',
    'ftp://10.0.0.11:30000', 'HTTP://10.0.0.11:30000', '10.0.0.11:30000', '//10.0.0.11:30000',
    'http://user:pw@10.0.0.11:30000',           # credentials have no place in a worker's record
    'http://$(hostname):30000', 'http://`id`:1', 'http://-x:1', 'http://fd00::11:30000',
    'http://10.0.0.11:30000\n', '', None, 30000,
])
def test_worker_urls_refused(url):
    assert not is_worker_url(url)


def test_the_message_names_the_url_as_given_and_what_is_allowed():
    assert worker_url_problem('http://x y:1/v1;rm') == (
        'worker_url must be http://host:port or https://host:port: a host name or IPv4 address (letters, digits and . _ '
        '-) or an IPv6 address in brackets, a port from 1 to 65535 and no path (a trailing / at most), such as '
        'http://10.0.0.11:30000 (got "http://x y:1/v1;rm")')
    # Blanks around it and trailing slashes are what normalise_url drops; credentials are masked.
    assert worker_url_problem(' %s// ' % NODE) is None
    assert 'pw' not in worker_url_problem('http://user:pw@10.0.0.11:30000')


@pytest.mark.parametrize('state_name', ['present', 'absent', 'query'])
def test_a_bad_worker_url_fails_before_any_request(state_name):
    worker, fake, clock = state({}, worker_url='http://x y:1/v1;rm')
    result, failure = worker.run(state_name)
    assert failure.startswith('worker_url must be http://host:port') and failure.endswith('(got "http://x y:1/v1;rm")')
    assert result['msg'] == failure and result['changed'] is False and fake.calls == [] and clock.sleeps == []
