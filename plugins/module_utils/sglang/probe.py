# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The readiness contract of an SGLang server over HTTP.

`/ping`, `/v1/models`, `/model_info` and an open port all answer during warmup, so none of them
proves readiness. Ready means: `/health_generate` 200 (a one-token round trip through the
scheduler), the log's ready line (unless warmup is skipped), our own `POST /generate` with at
least one completion token, and `/v1/models` naming the expected served model.
The HTTP transport is injected: ``http(method, url, headers, body, timeout)`` returns
``(status or None, text, error)``; status None means no HTTP answer (refused, reset, timed out).
"""

from __future__ import annotations

import json
import socket

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.versions import (
    FOLLOWER_LINE, HEALTH, HEALTH_GENERATE, READY_LINE,
)

HEALTH_PATH = HEALTH_GENERATE
PROMPT = 'The capital of France is'


def probe_host(host):
    """Where to connect for a server bound to `host` (a wildcard bind is reached on loopback)."""
    if host in ('', '0.0.0.0'):
        return '127.0.0.1'
    if host in ('::', '[::]'):
        return '::1'
    return host


def base_url(host, port):
    host = probe_host(host)
    if ':' in host and not host.startswith('['):
        host = '[%s]' % host
    return 'http://%s:%d' % (host, port)


def port_open(host, port, timeout=0.2, connect=socket.create_connection):
    try:
        sock = connect((probe_host(host), port), timeout)
    except (OSError, socket.error):
        return False
    sock.close()
    return True


def _json(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def _short(text, size=200):
    text = (text or '').strip().replace('\n', ' ')
    return text if len(text) <= size else text[:size] + '...'


class Probe:
    """One readiness round. Each step returns None when it passed, else why it did not; `permanent`
    names the cause when the answer can never change by waiting (see check_ready)."""

    def __init__(self, http, host, port, api_key=None, health_timeout=25.0, max_tokens=8):
        self.http = http
        self.url = base_url(host, port)
        self.api_key = api_key
        self.health_timeout = health_timeout
        self.max_tokens = max_tokens
        self.health_status = None
        self.sample = None
        self.served_model_name = None
        self.model_info = None
        self.permanent = None

    def _headers(self):
        headers = {'Content-Type': 'application/json'}
        if self.api_key:
            headers['Authorization'] = 'Bearer %s' % self.api_key
        return headers

    def _call(self, method, path, timeout, body=None):
        payload = json.dumps(body) if body is not None else None
        return self.http(method, self.url + path, self._headers(), payload, timeout)

    def health(self, clamp, path=HEALTH_PATH):
        status, text, error = self._call('GET', path, clamp(self.health_timeout))
        self.health_status = status
        if status == 200:
            return None
        if status is None:
            return '%s: no answer (%s)' % (path, error)
        return '%s answered %s %s' % (path, status, _short(text, 80))

    def generate(self, clamp):
        body = {'text': PROMPT, 'sampling_params': {'max_new_tokens': self.max_tokens, 'temperature': 0}}
        status, text, error = self._call('POST', '/generate', clamp(max(self.health_timeout, 60.0)), body)
        if status != 200:
            return 'POST /generate: %s' % ('no answer (%s)' % error if status is None else 'HTTP %s %s' % (status, _short(text, 120)))
        data = _json(text)
        if isinstance(data, list) and data:
            data = data[0]
        meta = data.get('meta_info', {}) if isinstance(data, dict) else {}
        tokens = meta.get('completion_tokens') if isinstance(meta, dict) else None
        if not isinstance(tokens, int) or tokens < 1:
            # A 200 is the scheduler's finished answer, not a warmup: asking again gets the same.
            self.permanent = 'no_tokens'
            return 'POST /generate answered 200 with no completion token: %s' % _short(text, 120)
        self.sample = {'prompt': PROMPT, 'text': _short(data.get('text', ''), 200), 'completion_tokens': tokens}
        return None

    def models(self, clamp, expected=None):
        status, text, error = self._call('GET', '/v1/models', clamp(10.0))
        data = _json(text) if status == 200 else None
        try:
            self.served_model_name = data['data'][0]['id']
        except (TypeError, KeyError, IndexError):
            return '/v1/models: %s' % ('no answer (%s)' % error if status is None else 'HTTP %s %s' % (status, _short(text, 120)))
        if expected and self.served_model_name != expected:
            return 'served model name is %r, expected %r' % (self.served_model_name, expected)
        return None

    def info(self, clamp):
        status, text, dummy = self._call('GET', '/model_info', clamp(10.0))
        data = _json(text) if status == 200 else None
        if isinstance(data, dict):
            self.model_info = data
        return None


def check_ready(probe, clamp, ready_line_seen, skip_warmup, expected_name=None):
    """Run the contract in order; returns (ready, reason, permanent).

    permanent: None, or the cause when the server answers but can never satisfy the contract as
    configured, so waiting longer is pointless: `served_model_name` (another name) or `no_tokens`
    (a finished generation with no token).
    """
    probe.permanent = None
    reason = probe.health(clamp)
    if reason:
        return False, reason, None
    if not skip_warmup and not ready_line_seen:
        return False, "/health_generate is 200 but the log has no '%s' yet" % READY_LINE, None
    reason = probe.generate(clamp)
    if reason:
        return False, reason, probe.permanent
    reason = probe.models(clamp, expected_name)
    if reason:
        return False, reason, 'served_model_name' if probe.served_model_name else None
    probe.info(clamp)
    return True, None, None


def check_follower(probe, clamp, line_seen=True):
    """A follower of a multi-node launch (--node-rank >= 1): (ready, reason, None).

    Real SGLang runs no tokenizer, no warmup and no HTTP server there, and never prints the ready
    line: once its schedulers are ready it starts a dummy health server and logs FOLLOWER_LINE; the
    server answers 200 on /health whatever the schedulers do, and the process blocks. That line in
    this start's log (line_seen; not required where the log level hides INFO lines) and the 200 are
    the whole of what a follower can say: another process answering on the port has no such line.
    The group's readiness is rank 0's contract.
    """
    reason = probe.health(clamp, HEALTH)
    if reason:
        return False, reason, None
    if not line_seen:
        return False, "%s is 200 but the log has no '%s' line yet" % (HEALTH, FOLLOWER_LINE), None
    return True, None, None
