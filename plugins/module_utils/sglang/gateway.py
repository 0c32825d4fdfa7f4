# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One SGLang node in SGLang's model gateway (smg 1.13.0): take it out of rotation and let it drain, or put it
back and wait until the gateway routes to it.

The API as recorded in tests/unit/fixtures/gateway/ (README.md there):
  - control-plane routes need ``Authorization: Bearer KEY``: 401 text without a valid one, 403 text
    (``Admin role required ...``) for POST/DELETE with a key of the ``user`` role;
  - ``GET /workers`` -> ``{"workers": [record, ...], "total": N, "stats": {...}}``; a record has ``id``, ``url``,
    ``status`` (``ready``, ``not_ready``, ``draining``, ``pending``) and ``is_healthy``;
  - ``GET /workers/ID`` -> a record (also of a registration still under way, ``status: pending`` with
    ``job_status``, which the list does not show yet), 404 ``WORKER_NOT_FOUND``, 400 for an ID that is no UUID;
  - ``POST /workers`` ``{"url": ..., "api_key": ...}`` -> 202 ``{"status": "accepted", "worker_id": ...}``; 409
    ``WORKER_ALREADY_EXISTS`` or ``WORKER_CREATE_IN_PROGRESS``, the ID in the message. The URL is taken as
    written: ``http://h:1/`` and ``http://h:1`` become two records, so URLs are sent without a trailing slash;
  - ``DELETE /workers/ID`` -> 202 ``{"status": "accepted", ...}``; the record stays listed as ``draining`` for
    the drain settle (5 s by default) and then disappears, while the node goes on with the requests it has.

The HTTP transport is injected as in sglang_probe: ``http(method, url, headers, body, timeout)`` returns
``(status or None, text, error)``; so are the clock and sleep, so the waits run in tests without time passing.
"""

from __future__ import annotations

import json
import math
import re
import time

from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import shown

RUNNING = 'sglang:num_running_reqs'
QUEUED = 'sglang:num_queue_reqs'
# Reads of nothing in flight, a poll interval apart, that end a drain.
QUIET_READS = 2
# 409 answers of POST /workers name the worker's ID in their message.
_ID_IN_MESSAGE = re.compile(r'with ID ([0-9a-fA-F-]{36})')
_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)(\s+\S+)?\s*$')
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')


# A worker as the gateway routes to it: scheme, host and port, nothing else. The URL goes into smg's
# argv and its worker records as written, so a space, a ; or a path would name a worker other than
# the node's server (or none); and without a port it is port 80, where no SGLang server listens.
WORKER_URL = re.compile(r'^https?://([A-Za-z0-9_][A-Za-z0-9_.-]*|\[[0-9A-Fa-f:.]+\]):([0-9]{1,5})/?\Z')
WORKER_URL_ALLOWED = ('http://host:port or https://host:port: a host name or IPv4 address (letters, digits and . _ -) '
                      'or an IPv6 address in brackets, a port from 1 to 65535 and no path (a trailing / at most), '
                      'such as http://10.0.0.11:30000')


def is_worker_url(url):
    """Whether url is a worker URL the gateway can route to: WORKER_URL, its port from 1 to 65535."""
    found = WORKER_URL.match(url) if isinstance(url, str) else None
    return bool(found) and 1 <= int(found.group(2)) <= 65535


def worker_url_problem(url, name='worker_url'):
    """None when url (surrounding blanks and trailing slashes aside, as normalise_url drops them) is a worker URL,
    else the message: the name, the URL as given (JSON, credentials masked) and what is allowed."""
    if isinstance(url, str) and is_worker_url(normalise_url(url)):
        return None
    return '%s must be %s (got %s)' % (name, WORKER_URL_ALLOWED, shown(url))


class GatewayError(Exception):
    """The gateway or the node answered in a way the module cannot go on from; the message says which."""


def short(text, size=200):
    """The first `size` characters of `text` on one line."""
    text = (text or '').strip().replace('\r', ' ').replace('\n', ' ')
    return text if len(text) <= size else text[:size] + '...'


def normalise_url(url):
    """A worker URL as the gateway should know it: no surrounding blanks, no trailing slash."""
    return (url or '').strip().rstrip('/')


def is_healthy(record):
    """Whether the gateway routes to the worker of `record`: is_healthy true and status ready."""
    return record.get('is_healthy') is True and record.get('status', 'ready') == 'ready'


def describe(record):
    """A worker record's state in words, for messages."""
    if record is None:
        return 'not listed'
    text = 'status %s, is_healthy %s' % (record.get('status'), json.dumps(record.get('is_healthy')))
    job = record.get('job_status')
    if isinstance(job, dict):
        text += ' (%s job %s%s)' % (job.get('job_type'), job.get('status'),
                                    ': %s' % short(job['message']) if job.get('message') else '')
    return text


def _seconds(value):
    return ('%.1f' % value).rstrip('0').rstrip('.')


class Gateway:
    """The gateway's control plane at `gateway_url`, every call bounded by `timeout` seconds."""

    def __init__(self, http, gateway_url, api_key, timeout=10):
        self.http = http
        self.url = normalise_url(gateway_url)
        self.api_key = api_key
        self.timeout = timeout

    def _scrub(self, text):
        return text.replace(self.api_key, '********') if self.api_key else text

    def request(self, method, path, body=None, expect=(200,)):
        """(status, parsed JSON) of one call; GatewayError when there is no answer or not an expected one."""
        headers = {'Authorization': 'Bearer %s' % self.api_key, 'Accept': 'application/json'}
        data = None
        if body is not None:
            headers['Content-Type'] = 'application/json'
            data = json.dumps(body)
        where = '%s %s%s' % (method, self.url, path)
        try:
            status, text, error = self.http(method, self.url + path, headers, data, self.timeout)
        except Exception as exc:  # pylint: disable=broad-except
            status, text, error = None, '', '%s: %s' % (type(exc).__name__, exc)
        if status is None:
            raise GatewayError(self._scrub('cannot reach the gateway at %s (%s): %s' % (self.url, where, error)))
        if status == 401:
            raise GatewayError(self._scrub('the gateway at %s refused the API key (HTTP 401 on %s: %s)'
                                           % (self.url, where, short(text))))
        if status == 403:
            raise GatewayError(self._scrub('the gateway at %s refused %s for this API key (HTTP 403: %s); adding and'
                                           ' removing workers needs a control-plane key of the admin role'
                                           % (self.url, where, short(text))))
        if status not in expect:
            raise GatewayError(self._scrub('unexpected answer from the gateway to %s: HTTP %s %s'
                                           % (where, status, short(text))))
        try:
            parsed = json.loads(text)
        except ValueError:
            raise GatewayError(self._scrub('unexpected answer from the gateway to %s: HTTP %s, not JSON: %s'
                                           % (where, status, short(text))))
        if not isinstance(parsed, dict):
            raise GatewayError(self._scrub('unexpected answer from the gateway to %s: HTTP %s, not a JSON object: %s'
                                           % (where, status, short(text))))
        return status, parsed

    def workers(self):
        """Every worker record the gateway lists (registrations still under way are not listed)."""
        dummy, data = self.request('GET', '/workers')
        records = data.get('workers')
        if not isinstance(records, list) or not all(isinstance(item, dict) for item in records):
            raise GatewayError('unexpected answer from the gateway to GET %s/workers: no list of workers: %s'
                               % (self.url, short(json.dumps(data))))
        return records

    def worker(self, worker_id):
        """The record of one worker ID (pending registrations included), None when the gateway has none."""
        status, data = self.request('GET', '/workers/%s' % worker_id, expect=(200, 404))
        return data if status == 200 else None

    def register(self, url, worker_api_key=None):
        """POST /workers: (outcome, worker ID), outcome `accepted`, `exists` or `in_progress` (409 answers)."""
        body = {'url': normalise_url(url)}
        if worker_api_key:
            body['api_key'] = worker_api_key
        status, data = self.request('POST', '/workers', body, expect=(200, 201, 202, 409))
        if status != 409:
            return 'accepted', data.get('worker_id')
        code = data.get('code')
        found = _ID_IN_MESSAGE.search(str(data.get('error', '')))
        worker_id = found.group(1) if found else None
        if code == 'WORKER_ALREADY_EXISTS':
            return 'exists', worker_id
        if code == 'WORKER_CREATE_IN_PROGRESS':
            return 'in_progress', worker_id
        raise GatewayError('unexpected answer from the gateway to POST %s/workers: HTTP 409 %s'
                           % (self.url, short(json.dumps(data))))

    def remove(self, worker_id):
        """DELETE /workers/ID: True when the removal was queued, False when the gateway had no such worker."""
        status, dummy = self.request('DELETE', '/workers/%s' % worker_id, expect=(200, 202, 204, 404))
        return status != 404


def find(records, url):
    """The records whose URL is `url`, trailing slashes aside (the gateway may hold both spellings)."""
    wanted = normalise_url(url)
    return [record for record in records if normalise_url(record.get('url')) == wanted]


def healthy_count(records, exclude_url=None):
    """Healthy workers among `records`, those of `exclude_url` left out."""
    skip = normalise_url(exclude_url) if exclude_url else None
    return sum(1 for record in records if is_healthy(record) and normalise_url(record.get('url')) != skip)


def _labels(text):
    labels = {}
    rest = text[1:-1]
    while rest.strip():
        found = _LABEL.match(rest)
        if not found:
            raise ValueError('bad labels %s' % text)
        value = found.group(2).replace('\\"', '"').replace('\\n', '\n').replace('\\\\', '\\')
        labels[found.group(1)] = value
        rest = rest[found.end():]
    return labels


def parse_prometheus(text):
    """[(name, labels, value)] of the samples of Prometheus text format 0.0.4; comments and blank lines skipped,
    lines that are no sample ignored."""
    samples = []
    for line in (text or '').splitlines():
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        found = _SAMPLE.match(line)
        if not found:
            continue
        try:
            labels = _labels(found.group(2)) if found.group(2) else {}
            value = float(found.group(3))
        except ValueError:
            continue
        samples.append((found.group(1), labels, value))
    return samples


def in_flight(text):
    """{'in_flight', 'running', 'queued'} from a node's /metrics: the sums of every sample of the two gauges.

    ValueError when the text has neither gauge.
    """
    sums = {RUNNING: None, QUEUED: None}
    for name, dummy, value in parse_prometheus(text):
        if name in sums and not math.isnan(value):  # NaN is no count
            sums[name] = (sums[name] or 0) + value
    if sums[RUNNING] is None and sums[QUEUED] is None:
        raise ValueError('no %s or %s samples' % (RUNNING, QUEUED))
    running, queued = int(round(sums[RUNNING] or 0)), int(round(sums[QUEUED] or 0))
    return {'in_flight': running + queued, 'running': running, 'queued': queued}


class NodeMetrics:
    """The node's own Prometheus endpoint (served without the API key)."""

    def __init__(self, http, metrics_url, timeout=10):
        self.http = http
        self.url = metrics_url
        self.timeout = timeout

    def read(self):
        """{'in_flight', 'running', 'queued', 'refused'}; a node that refuses connections has nothing in flight."""
        try:
            status, text, error = self.http('GET', self.url, {'Accept': 'text/plain'}, None, self.timeout)
        except Exception as exc:  # pylint: disable=broad-except
            status, text, error = None, '', '%s: %s' % (type(exc).__name__, exc)
        if status is None:
            if 'refused' in (error or '').lower():
                return {'in_flight': 0, 'running': 0, 'queued': 0, 'refused': True}
            raise GatewayError('cannot read the in-flight requests of the node at %s: %s' % (self.url, error))
        if status == 404:
            raise GatewayError('the node answers 404 at %s: the SGLang server needs --enable-metrics'
                               ' (sglang_server_enable_metrics: true) for its in-flight requests to be read'
                               % self.url)
        if status != 200:
            raise GatewayError('unexpected answer from the node to GET %s: HTTP %s %s'
                               % (self.url, status, short(text)))
        try:
            counts = in_flight(text)
        except ValueError:
            raise GatewayError('the metrics at %s have no %s or %s gauge: %s'
                               % (self.url, RUNNING, QUEUED, short(text)))
        counts['refused'] = False
        return counts


class WorkerState:
    """Brings one worker URL to a state in the gateway: `query`, `present` (registered and healthy) or `absent`
    (out of rotation and drained). run() returns (result, failure message or None)."""

    def __init__(self, gateway, metrics, worker_url, worker_api_key=None, drain_timeout=300, healthy_timeout=300,
                 min_in_rotation=1, poll_interval=1.0, check_mode=False, clock=time.monotonic, sleep=time.sleep):
        self.gateway = gateway
        self.metrics = metrics
        self.given_url = worker_url
        self.url = normalise_url(worker_url)
        self.worker_api_key = worker_api_key
        self.drain_timeout = drain_timeout
        self.healthy_timeout = healthy_timeout
        self.min_in_rotation = min_in_rotation
        self.poll_interval = poll_interval
        self.check_mode = check_mode
        self.clock = clock
        self.sleep = sleep
        self.started = None
        self.result = {}

    # -- helpers ------------------------------------------------------------------------------
    def _elapsed(self):
        return self.clock() - self.started

    def _pause(self, timeout):
        """Sleep one poll interval (less when the deadline is nearer); False once `timeout` seconds passed."""
        left = timeout - self._elapsed()
        if left <= 0:
            return False
        self.sleep(min(self.poll_interval, left))
        return True

    def _look(self):
        """Lists the workers and records what the result says of this one."""
        records = self.gateway.workers()
        mine = find(records, self.url)
        healthy = [record for record in mine if is_healthy(record)]
        self.result.update(worker=(healthy or mine or [None])[0], in_rotation=bool(healthy), registered=bool(mine),
                           healthy_workers=healthy_count(records))
        return records, mine

    def _read_metrics(self):
        counts = self.metrics.read()
        self.result['in_flight'] = counts['in_flight']
        return counts

    def run(self, state):
        self.started = self.clock()
        self.result = {'changed': False, 'worker': None, 'in_rotation': False, 'registered': False,
                       'healthy_workers': None, 'in_flight': None, 'waited': 0.0, 'msg': ''}
        # Before any request: a URL that is no worker's would be registered or looked for as written.
        failure = worker_url_problem(self.given_url)
        if failure:
            self.result['msg'] = failure
            return self.result, failure
        try:
            self.result['msg'] = getattr(self, state)()
        except GatewayError as exc:
            failure = str(exc)
        self.result['waited'] = round(self._elapsed(), 1)
        if failure:
            self.result['msg'] = failure
        return self.result, failure

    # -- states -------------------------------------------------------------------------------
    def query(self):
        dummy, mine = self._look()
        try:
            counts = self._read_metrics()
            flight = 'nothing in flight, it refuses connections' if counts['refused'] else \
                '%d request(s) in flight' % counts['in_flight']
        except GatewayError as exc:
            flight = 'in-flight requests unknown: %s' % exc
        if not mine:
            return '%s is not registered with the gateway (%d healthy worker(s)); %s' % (
                self.url, self.result['healthy_workers'], flight)
        return '%s is registered with the gateway (%s; %d healthy worker(s)); %s' % (
            self.url, describe(self.result['worker']), self.result['healthy_workers'], flight)

    def absent(self):
        records, mine = self._look()
        if mine:
            others = healthy_count(records, exclude_url=self.url)
            if others < self.min_in_rotation:
                raise GatewayError(
                    'refusing to take %s out of rotation: %d other healthy worker(s) of %d listed would stay, fewer'
                    ' than min_in_rotation %d' % (self.url, others, len(records), self.min_in_rotation))
            self.result['changed'] = True
            if self.check_mode:
                return 'would take %s out of the gateway\'s rotation (%d other healthy worker(s) stay) and wait for' \
                       ' its in-flight requests to finish' % (self.url, others)
            for record in mine:
                self.gateway.remove(record['id'])
            while mine:
                if not self._pause(self.drain_timeout):
                    raise GatewayError('the gateway still lists %s (%s) %s s after its removal (drain_timeout %s s)'
                                       % (self.url, describe(mine[0]), _seconds(self._elapsed()), self.drain_timeout))
                records, mine = self._look()
            done = 'took %s out of the gateway\'s rotation (%d healthy worker(s) left)' % (
                self.url, self.result['healthy_workers'])
        else:
            if self.check_mode:
                return '%s is not registered with the gateway (no change; its in-flight requests are not waited for' \
                       ' in check mode)' % self.url
            done = '%s is not registered with the gateway (no change; %d healthy worker(s))' % (
                self.url, self.result['healthy_workers'])
        self.result['worker'] = None
        counts = self._read_metrics()
        quiet = 0
        while not counts['refused']:
            # Nothing in flight twice, a poll apart: a request the tokenizer still holds, or one on its
            # way to its scheduler, is in no scheduler's count for that moment.
            quiet = quiet + 1 if counts['in_flight'] == 0 else 0
            if quiet >= QUIET_READS:
                break
            if not self._pause(self.drain_timeout):
                if counts['in_flight'] == 0:
                    break
                raise GatewayError('%s still has %d request(s) in flight (running %d, queued %d) after %s s'
                                   ' (drain_timeout %s s)' % (self.url, counts['in_flight'], counts['running'],
                                                              counts['queued'], _seconds(self._elapsed()),
                                                              self.drain_timeout))
            counts = self._read_metrics()
        if counts['refused']:
            return '%s; the node refuses connections, so nothing is in flight' % done
        return '%s; nothing in flight on the node after %s s' % (done, _seconds(self._elapsed()))

    def present(self):
        dummy, mine = self._look()
        if self.result['in_rotation']:
            return '%s is in the gateway\'s rotation (%d healthy worker(s))' % (
                self.url, self.result['healthy_workers'])
        if self.check_mode:
            if mine and not all(record.get('status') == 'draining' for record in mine):
                return '%s is registered but not healthy (%s); check mode does not wait' % (
                    self.url, describe(mine[0]))
            self.result['changed'] = True
            return 'would register %s with the gateway and wait until it is healthy' % self.url
        pending_id = None
        last = mine[0] if mine else None
        posted = False
        while True:
            if not mine and not posted:
                outcome, pending_id = self.gateway.register(self.url, self.worker_api_key)
                posted = True
                self.result['changed'] = outcome == 'accepted'
            elif mine:
                last = mine[0]
            if not mine and pending_id:
                # A registration under way is not listed yet: its own record says how far it got.
                last = self.gateway.worker(pending_id)
            if not self._pause(self.healthy_timeout):
                hint = ''
                if last is not None and last.get('status') == 'pending':
                    hint = ('; the gateway keeps a worker pending while it cannot read the server\'s model'
                            ' (a server started with --api-key needs worker_api_key)')
                raise GatewayError('%s is not healthy in the gateway after %s s (healthy_timeout %s s); last status'
                                   ' seen: %s%s' % (self.url, _seconds(self._elapsed()), self.healthy_timeout,
                                                    describe(last), hint))
            dummy, mine = self._look()
            if self.result['in_rotation']:
                break
            if mine and all(record.get('status') == 'draining' for record in mine):
                posted = False  # still leaving: registered again once it is gone
        verb = ('registered %s with the gateway' if self.result['changed'] else '%s joined the gateway') % self.url
        return '%s; healthy after %s s (%d healthy worker(s))' % (verb, _seconds(self._elapsed()),
                                                                  self.result['healthy_workers'])
