# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The requests a node still has in flight, for the drain: live from `/v1/loads`, else `/metrics`.

The gauges `sglang:num_running_reqs` / `sglang:num_queue_reqs` on `/metrics` are samples: the
scheduler sets them on a prefill, every 40th decode step and, idle, only after 30 s (0.5.9); a
request admitted after the last sample reads 0 there and a drain trusting them ends early.
`GET /v1/loads` (both supported releases: 0.5.9 and 0.5.23; `/get_load` is gone in 0.5.23) asks
every scheduler for its running batch and waiting queue at that moment. It needs the server's API
key; `/metrics` does not. A server without it (404: an older release) is read from `/metrics`.

The HTTP transport is injected as in sglang_gateway.
"""

from __future__ import annotations

import json

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.gateway import GatewayError, NodeMetrics, short
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.versions import LOADS

LOADS_QUERY = LOADS + '?include=core'


def loads_in_flight(text):
    """{'in_flight', 'running', 'queued'} of a /v1/loads answer: the sums over its DP ranks' loads.

    ValueError when it is no such answer."""
    data = json.loads(text)
    loads = data.get('loads') if isinstance(data, dict) else None
    if not isinstance(loads, list) or not loads:
        raise ValueError('no loads')
    running = queued = 0
    for load in loads:
        if not isinstance(load, dict):
            raise ValueError('a load is no mapping')
        values = [load.get('num_running_reqs', 0), load.get('num_waiting_reqs', 0)]
        if any(isinstance(value, bool) or not isinstance(value, int) or value < 0 for value in values):
            raise ValueError('bad counts %r' % values)
        running += values[0]
        queued += values[1]
    return {'in_flight': running + queued, 'running': running, 'queued': queued}


class NodeLoad:
    """A node's live in-flight count: /v1/loads with the server's API key; /metrics where there is none."""

    def __init__(self, http, worker_url, api_key=None, metrics_url=None, timeout=10):
        self.http = http
        self.url = worker_url.rstrip('/') + LOADS_QUERY
        self.api_key = api_key
        self.timeout = timeout
        self.metrics = NodeMetrics(http, metrics_url or worker_url.rstrip('/') + '/metrics', timeout=timeout)
        self.live = True

    def _headers(self):
        headers = {'Accept': 'application/json'}
        if self.api_key:
            headers['Authorization'] = 'Bearer %s' % self.api_key
        return headers

    def read(self):
        """{'in_flight', 'running', 'queued', 'refused', 'source'}; a node that refuses connections has
        nothing in flight."""
        if not self.live:
            return self._sampled()
        try:
            status, text, error = self.http('GET', self.url, self._headers(), None, self.timeout)
        except Exception as exc:  # pylint: disable=broad-except
            status, text, error = None, '', '%s: %s' % (type(exc).__name__, exc)
        if status is None:
            if 'refused' in (error or '').lower():
                return {'in_flight': 0, 'running': 0, 'queued': 0, 'refused': True, 'source': self.url}
            raise GatewayError('cannot read the in-flight requests of the node at %s: %s' % (self.url, error))
        if status == 404:
            self.live = False
            return self._sampled()
        if status in (401, 403):
            raise GatewayError('the node answers %s at %s: its API key is needed (worker_api_key, the server\'s '
                               'sglang_server_api_key)' % (status, self.url))
        if status != 200:
            raise GatewayError('unexpected answer from the node to GET %s: HTTP %s %s' % (self.url, status, short(text)))
        try:
            counts = loads_in_flight(text)
        except ValueError:
            raise GatewayError('the answer of %s has no loads with num_running_reqs and num_waiting_reqs: %s'
                               % (self.url, short(text)))
        counts.update(refused=False, source=self.url)
        return counts

    def _sampled(self):
        counts = self.metrics.read()
        counts['source'] = self.metrics.url
        return counts
