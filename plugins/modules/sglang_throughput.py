#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_throughput
short_description: Measure an SGLang server's output tokens per second and fail when it fell below its baseline
version_added: 0.1.0
description:
  - Sends a fixed load to a running SGLang server. O(requests) C(POST /generate) requests, spread over O(concurrency)
    worker threads, each asking for O(max_new_tokens) tokens with C(ignore_eos), so every request generates all of them.
  - The throughput is the output tokens (C(meta_info.completion_tokens)) of all requests divided by the wall seconds of
    the whole load. A request without an answer, or with any HTTP status but 200, fails naming the status and the
    head of the body.
  - The baseline is O(baseline) when above 0 (source C(inventory)), else the one recorded on the host in
    C(throughput-baseline.json) under O(state_dir) (source C(host)), else there is none (source C(none)). Without
    a baseline the measurement passes and, with O(record_baseline), becomes the host's baseline.
  - A measurement below O(ratio) times the baseline fails, saying that the new stack is slower.
  - Every measurement is written to C(throughput-last.json) under O(state_dir), also one that fails the ratio.
    Check mode measures and judges but writes nothing.
  - The server is reached directly, never through a proxy.
options:
  host:
    description: Where the server listens; a wildcard bind (V(0.0.0.0), V(::)) is reached on loopback.
    type: str
    default: 127.0.0.1
  port:
    description: The server's HTTP port.
    type: int
    default: 30000
  api_key:
    description: The server's API key, sent as a bearer token when given.
    type: str
  concurrency:
    description: Worker threads sending requests at the same time (at most O(requests) are started).
    type: int
    default: 4
  requests:
    description: Number of C(POST /generate) requests of the load.
    type: int
    default: 16
  max_new_tokens:
    description: Tokens each request generates (C(sampling_params.max_new_tokens)).
    type: int
    default: 64
  prompt:
    description: The prompt of every request.
    type: str
    default: Write a long story about a lighthouse keeper and the sea.
  request_timeout:
    description: Seconds one request may take.
    type: float
    default: 120
  timeout:
    description: Seconds the whole load may take; no request starts after it and none runs past it.
    type: float
    default: 600
  baseline:
    description:
      - Tokens per second this host is expected to reach (from the inventory). V(0) means none was given, so the
        baseline recorded on the host is used.
    type: float
    default: 0
  ratio:
    description: The least share of the baseline a measurement must reach, above 0 and at most 1.
    type: float
    default: 0.8
  state_dir:
    description: Directory of C(throughput-baseline.json) and C(throughput-last.json); it must exist (unless in check mode).
    type: path
    default: /var/lib/inferops/sglang
  record_baseline:
    description:
      - Record the measurement as the host's baseline when the host has none and O(baseline) is V(0).
    type: bool
    default: true
  revision:
    description: The server's revision (written into the files with the measurement).
    type: str
  release:
    description: The ml-env release the server runs (written into the files with the measurement).
    type: str
attributes:
  check_mode:
    support: full
    details: Runs the load and judges it, writing no file.
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
seealso:
  - module: inferops.gpu.sglang_server
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Measure the server against the baseline the host recorded at its first measurement
  inferops.gpu.sglang_throughput:
    port: 30000
    api_key: "{{ sglang_server_api_key }}"
    release: /opt/ml-env-releases/2026-02-01

- name: Measure against a baseline from the inventory, failing below 90 percent of it
  inferops.gpu.sglang_throughput:
    port: 30000
    baseline: 96.1
    ratio: 0.9
    concurrency: 8
    requests: 32
    max_new_tokens: 128
"""

RETURN = r"""
tokens_per_second:
  description: Output tokens of the whole load divided by its wall seconds.
  returned: when the load ran
  type: float
  sample: 96.13
output_tokens:
  description: Output tokens of all requests (C(meta_info.completion_tokens)).
  returned: when the load ran
  type: int
  sample: 1024
seconds:
  description: Wall seconds of the whole load.
  returned: when the load ran
  type: float
  sample: 10.652
requests:
  description: Requests of the load.
  returned: always
  type: int
  sample: 16
concurrency:
  description: Worker threads of the load.
  returned: always
  type: int
  sample: 4
baseline:
  description: The baseline in tokens per second, null when there is none.
  returned: when the load ran
  type: float
  sample: 120.4
baseline_source:
  description: Where the baseline came from.
  returned: when the load ran
  type: str
  choices: [inventory, host, none]
  sample: host
ratio:
  description: The measurement divided by the baseline, null without a baseline.
  returned: when the load ran
  type: float
  sample: 0.7984
passed:
  description: Whether the measurement reached O(ratio) times the baseline (true without a baseline).
  returned: when the load ran
  type: bool
  sample: true
recorded_baseline:
  description: Whether the measurement was recorded as the host's baseline (in check mode, whether it would be).
  returned: when the load ran
  type: bool
  sample: false
last_path:
  description: The file of the last measurement.
  returned: always
  type: str
  sample: /var/lib/inferops/sglang/throughput-last.json
baseline_path:
  description: The file of the host's baseline.
  returned: always
  type: str
  sample: /var/lib/inferops/sglang/throughput-baseline.json
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.load import (
    BASELINE_FILE, DEFAULT_PROMPT, LAST_FILE, LoadError, run_load, throughput_gate,
)
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.server_module import http


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type='str', default='127.0.0.1'),
            port=dict(type='int', default=30000),
            api_key=dict(type='str', no_log=True),
            concurrency=dict(type='int', default=4),
            requests=dict(type='int', default=16),
            max_new_tokens=dict(type='int', default=64, no_log=False),
            prompt=dict(type='str', default=DEFAULT_PROMPT),
            request_timeout=dict(type='float', default=120),
            timeout=dict(type='float', default=600),
            baseline=dict(type='float', default=0),
            ratio=dict(type='float', default=0.8),
            state_dir=dict(type='path', default='/var/lib/inferops/sglang'),
            record_baseline=dict(type='bool', default=True),
            revision=dict(type='str'),
            release=dict(type='str'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    paths = {'last_path': os.path.join(params['state_dir'], LAST_FILE),
             'baseline_path': os.path.join(params['state_dir'], BASELINE_FILE)}
    shape = {'requests': params['requests'], 'concurrency': params['concurrency']}
    problems = [
        '%s must be at least 1 (got %s)' % (name, params[name])
        for name in ('port', 'concurrency', 'requests', 'max_new_tokens') if params[name] < 1
    ]
    problems += ['%s must be above 0 (got %s)' % (name, params[name])
                 for name in ('request_timeout', 'timeout') if params[name] <= 0]
    if params['port'] > 65535:
        problems.append('port must be at most 65535 (got %s)' % params['port'])
    if params['baseline'] < 0:
        problems.append('baseline must be 0 (none given) or above (got %s)' % params['baseline'])
    if not 0 < params['ratio'] <= 1:
        problems.append('ratio must be above 0 and at most 1 (got %s)' % params['ratio'])
    # In check mode a run that would create it has not: nothing is written there anyway.
    if not module.check_mode and not os.path.isdir(params['state_dir']):
        problems.append('state_dir %s is not a directory' % params['state_dir'])
    if problems:
        module.fail_json(msg='; '.join(problems), changed=False, **dict(shape, **paths))

    def load():
        return run_load(http, params['host'], params['port'], api_key=params['api_key'], prompt=params['prompt'],
                        max_new_tokens=params['max_new_tokens'], requests=params['requests'],
                        concurrency=params['concurrency'], request_timeout=params['request_timeout'],
                        timeout=params['timeout'])

    try:
        result, failure = throughput_gate(load, params['state_dir'], baseline=params['baseline'], ratio=params['ratio'],
                                          record_baseline=params['record_baseline'], revision=params['revision'],
                                          release=params['release'], check_mode=module.check_mode)
    except (LoadError, ValueError) as exc:
        module.fail_json(msg=str(exc), changed=False, **dict(shape, **paths))
    except (IOError, OSError) as exc:
        module.fail_json(msg='cannot write the throughput files in %s: %s' % (params['state_dir'], exc),
                         changed=False, **dict(shape, **paths))
    result.update(shape)
    if failure:
        module.fail_json(msg=failure, **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
