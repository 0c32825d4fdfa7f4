# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The throughput gate of an SGLang server: a fixed load, its tokens per second, and the verdict
against a baseline (the inventory's, else the one recorded on the host).

The HTTP transport is injected as in sglang_probe: ``http(method, url, headers, body, timeout)``
returns ``(status or None, text, error)``. Clocks and file paths are injected too, so the logic
runs in tests without a server.
"""

from __future__ import annotations

import datetime
import json
import os
import threading
import time

from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import replace_text
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.probe import base_url

BASELINE_FILE = 'throughput-baseline.json'
LAST_FILE = 'throughput-last.json'
DEFAULT_PROMPT = 'Write a long story about a lighthouse keeper and the sea.'
# How much longer than the overall timeout the caller waits for the workers to notice it.
JOIN_SLACK = 5.0


class LoadError(Exception):
    """The load could not be measured (a request failed, or the time ran out)."""


def _short(text, size=200):
    text = (text or '').strip().replace('\n', ' ')
    return text if len(text) <= size else text[:size] + '...'


def request_body(prompt, max_new_tokens):
    return {'text': prompt, 'sampling_params': {'max_new_tokens': max_new_tokens, 'temperature': 0,
                                                'ignore_eos': True}}


def completion_tokens(text):
    """meta_info.completion_tokens of a /generate answer, or None."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return None
    if isinstance(data, list) and data:
        data = data[0]
    meta = data.get('meta_info') if isinstance(data, dict) else None
    tokens = meta.get('completion_tokens') if isinstance(meta, dict) else None
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        return None
    return tokens


def run_load(http, host, port, api_key=None, prompt=DEFAULT_PROMPT, max_new_tokens=64, requests=16, concurrency=4,
             request_timeout=120.0, timeout=600.0, clock=time.monotonic):
    """`requests` POST /generate over `concurrency` worker threads; {'output_tokens', 'seconds', 'tokens_per_second'}.

    Raises LoadError on the first failed request (status, body head) or when `timeout` seconds pass.
    """
    url = base_url(host, port) + '/generate'
    headers = {'Content-Type': 'application/json'}
    if api_key:
        headers['Authorization'] = 'Bearer %s' % api_key
    body = json.dumps(request_body(prompt, max_new_tokens))
    lock = threading.Lock()
    state = {'next': 0, 'tokens': 0, 'errors': []}
    started = clock()
    deadline = started + timeout

    def take():
        with lock:
            if state['errors'] or state['next'] >= requests:
                return None
            state['next'] += 1
            return state['next']

    def fail(message):
        with lock:
            state['errors'].append(message)

    def worker():
        while True:
            number = take()
            if number is None:
                return
            left = deadline - clock()
            if left <= 0:
                fail('the load did not finish in %s s (overall timeout)' % _num(timeout))
                return
            where = 'POST /generate (request %d of %d)' % (number, requests)
            try:
                status, text, error = http('POST', url, headers, body, min(request_timeout, left))
            except Exception as exc:  # pylint: disable=broad-except
                status, text, error = None, '', '%s: %s' % (type(exc).__name__, exc)
            if status is None:
                fail('%s: no answer (%s)' % (where, error))
                return
            if status != 200:
                fail('%s: HTTP %s %s' % (where, status, _short(text)))
                return
            tokens = completion_tokens(text)
            if tokens is None:
                fail('%s: the answer has no meta_info.completion_tokens: %s' % (where, _short(text)))
                return
            with lock:
                state['tokens'] += tokens

    workers = [threading.Thread(target=worker, name='sglang-load-%d' % index)
               for index in range(max(1, min(concurrency, requests)))]
    for thread in workers:
        thread.daemon = True
        thread.start()
    for thread in workers:
        thread.join(max(0.0, deadline + JOIN_SLACK - clock()))
    seconds = clock() - started
    if any(thread.is_alive() for thread in workers):
        fail('the load did not finish in %s s (overall timeout)' % _num(timeout))
    if state['errors']:
        raise LoadError(state['errors'][0])
    if state['tokens'] < 1:
        raise LoadError('POST /generate produced no output tokens in %d request(s)' % requests)
    seconds = max(seconds, 1e-6)
    return {'output_tokens': state['tokens'], 'seconds': round(seconds, 3),
            'tokens_per_second': round(state['tokens'] / seconds, 2)}


def _num(value):
    return ('%.3f' % value).rstrip('0').rstrip('.')


def read_json(path):
    """The JSON object in `path`; None when the file does not exist. ValueError when it is not a JSON object."""
    try:
        with open(path) as handle:
            text = handle.read()
    except (IOError, OSError) as exc:
        if not os.path.exists(path):
            return None
        raise ValueError(str(exc))
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError('not a JSON object')
    return data


def write_json(path, data):
    """Replace path with data as JSON in one rename, mode 0644."""
    replace_text(path, json.dumps(data, indent=2, sort_keys=True) + '\n', 0o644)


def host_baseline(path):
    """tokens_per_second of the host's baseline file, None when there is none. ValueError when it is unusable."""
    try:
        data = read_json(path)
    except ValueError as exc:
        raise ValueError('the host baseline %s is not readable JSON (%s): remove it to record a new one, or set'
                         ' sglang_server_throughput_baseline' % (path, exc))
    if data is None:
        return None
    value = data.get('tokens_per_second')
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError('the host baseline %s has no positive tokens_per_second (%s): remove it to record a new'
                         ' one, or set sglang_server_throughput_baseline' % (path, json.dumps(value)))
    return float(value)


def choose_baseline(option, recorded):
    """(baseline, source): the option when > 0 (inventory), else the host's (host), else (None, 'none')."""
    if option and option > 0:
        return float(option), 'inventory'
    if recorded is not None:
        return recorded, 'host'
    return None, 'none'


def judge(measured, baseline, source, ratio):
    """(ratio or None, passed, message or None) of a measurement against its baseline."""
    if baseline is None:
        return None, True, None
    observed = measured / baseline
    if observed >= ratio:
        return round(observed, 4), True, None
    message = ('throughput %.1f tok/s is %.2f of the baseline %.1f tok/s (%s), below the ratio %s; the new stack is'
               ' slower: roll back or set sglang_server_throughput_baseline'
               % (measured, observed, baseline, source, _num(ratio)))
    return round(observed, 4), False, message


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def throughput_gate(load, state_dir, baseline=0.0, ratio=0.8, record_baseline=True, revision=None, release=None,
                    check_mode=False, now=utc_now, write=write_json):
    """Measure with `load()` (run_load's result), judge, and write the files.

    Returns (result, failure message or None); LoadError and ValueError (an unusable baseline file)
    propagate. Nothing is written in check mode; `changed` says what was (or would be) written.
    """
    baseline_path = os.path.join(state_dir, BASELINE_FILE)
    last_path = os.path.join(state_dir, LAST_FILE)
    recorded = host_baseline(baseline_path) if not (baseline and baseline > 0) else None
    reference, source = choose_baseline(baseline, recorded)
    measured = load()
    observed, passed, message = judge(measured['tokens_per_second'], reference, source, ratio)
    stamp = now()
    revision = revision or ''
    release = release or ''
    record = source == 'none' and record_baseline
    last = {'tokens_per_second': measured['tokens_per_second'], 'measured_at': stamp, 'baseline': reference,
            'baseline_source': source, 'ratio': observed, 'passed': passed, 'revision': revision, 'release': release}
    if not check_mode:
        if record:
            write(baseline_path, {'tokens_per_second': measured['tokens_per_second'], 'measured_at': stamp,
                                  'revision': revision, 'release': release, 'source': 'measured'})
        write(last_path, last)
    result = dict(measured, baseline=reference, baseline_source=source, ratio=observed, passed=passed,
                  recorded_baseline=record, changed=True, last_path=last_path, baseline_path=baseline_path)
    return result, message
