#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_gateway_worker
short_description: Drain an SGLang node out of SGLang's model gateway, or add it back and wait until it is healthy there
version_added: 0.1.0
description:
  - Manages one worker (an SGLang server) of SGLang's model gateway (C(smg), tested with 1.13.0) through the
    gateway's control plane (C(GET), C(POST) and C(DELETE) on C(/workers)), with a control-plane API key of the
    C(admin) role.
  - O(state=absent) takes the node out of rotation. It refuses when fewer than O(min_in_rotation) other healthy
    workers would stay, removes the worker (C(DELETE /workers/ID), every record of its URL), waits until the gateway
    no longer lists it, and then reads the node's live load (C(GET /v1/loads), with O(worker_api_key)) until its
    schedulers' running plus waiting requests are 0 twice in a row, a poll apart, so the requests the node already
    had are finished. The gauges of C(/metrics) are samples (a request admitted after the last one reads 0 there);
    they are read only from a server without C(/v1/loads). A node that refuses
    connections has nothing in flight. A node that is not registered is not changed, but its in-flight requests are
    still waited for, so a run repeated after a failure is safe. Both waits share O(drain_timeout).
  - O(state=present) registers the node (C(POST /workers)) when the gateway does not list it and waits until the
    gateway lists it with C(is_healthy) true and status C(ready), up to O(healthy_timeout). A worker still draining
    out of the gateway is registered again once it is gone.
  - O(state=query) only reports the worker's record and the node's in-flight requests.
  - Worker URLs are compared and sent without a trailing slash (the gateway would take C(http://h:1/) and
    C(http://h:1) for two workers).
  - The gateway and the node are reached directly, never through a proxy. Every request is bounded by O(timeout).
options:
  gateway_url:
    description: The gateway's base URL, for example V(http://10.0.0.5:30080).
    type: str
    required: true
  api_key:
    description:
      - A control-plane API key of the gateway (the last field of its C(--control-plane-api-keys) entry), sent as a
        bearer token. Adding and removing workers needs one of the C(admin) role.
      - Exactly one of O(api_key) and O(api_key_file) is required.
    type: str
  api_key_file:
    description: A file on the managed host that holds the control-plane API key (surrounding blanks are ignored).
    type: path
  worker_url:
    description:
      - The node's URL as the gateway routes to it, for example V(http://10.0.0.11:30000).
      - C(http://host:port) or C(https://host:port) and nothing else (a trailing C(/) at most); the host a name or an
        IPv4 address, or an IPv6 address in brackets. Any other value fails before any request.
    type: str
    required: true
  worker_api_key:
    description:
      - The node's own API key (its C(--api-key)), handed to the gateway when O(state=present) registers it. Without
        it the gateway cannot read the model of a server started with C(--api-key) and keeps the worker pending.
    type: str
  state:
    description:
      - V(present) registers the node and waits until it is healthy in the gateway; V(absent) takes it out of
        rotation and waits until its in-flight requests finished; V(query) reports only.
    type: str
    choices: [present, absent, query]
    default: present
  metrics_url:
    description:
      - The node's Prometheus endpoint, read for the in-flight requests only when the server has no C(/v1/loads)
        (an SGLang older than 0.5.9; it needs C(--enable-metrics), role variable C(sglang_server_enable_metrics)).
        Defaults to O(worker_url) followed by C(/metrics).
    type: str
  drain_timeout:
    description: Seconds O(state=absent) waits for the gateway to drop the worker and for its in-flight requests to finish.
    type: int
    default: 300
  healthy_timeout:
    description: Seconds O(state=present) waits for the worker to be listed healthy and ready.
    type: int
    default: 300
  min_in_rotation:
    description: The least number of other healthy workers that must stay in rotation for O(state=absent) to remove this one.
    type: int
    default: 1
  poll_interval:
    description: Seconds between two looks at the gateway or the node while waiting.
    type: float
    default: 1.0
  timeout:
    description: Seconds one HTTP request may take.
    type: int
    default: 10
attributes:
  check_mode:
    support: full
    details: Reads the gateway and reports whether the registration would change; sends no C(POST) or C(DELETE) and does not wait.
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
seealso:
  - module: inferops.gpu.sglang_server
  - module: inferops.gpu.sglang_throughput
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Take the node out of the gateway's rotation and let its requests finish
  inferops.gpu.sglang_gateway_worker:
    gateway_url: http://gateway.example:30080
    api_key_file: /etc/inferops/gateway-admin.key
    worker_url: "http://{{ ansible_host }}:30000"
    state: absent
    drain_timeout: 600
    min_in_rotation: 2

- name: Put it back and wait until the gateway routes to it
  inferops.gpu.sglang_gateway_worker:
    gateway_url: http://gateway.example:30080
    api_key: "{{ gateway_admin_key }}"
    worker_url: "http://{{ ansible_host }}:30000"
    worker_api_key: "{{ sglang_server_api_key }}"
    state: present
    healthy_timeout: 120

- name: Report where the node stands
  inferops.gpu.sglang_gateway_worker:
    gateway_url: http://gateway.example:30080
    api_key: "{{ gateway_admin_key }}"
    worker_url: "http://{{ ansible_host }}:30000"
    state: query
  register: gateway_worker
"""

RETURN = r"""
worker:
  description: The gateway's record of the worker (its healthy one when it holds several), null when it lists none.
  returned: always
  type: dict
  sample:
    id: 01a23019-fced-7045-93ae-d85dc351a3e6
    url: http://127.0.0.1:31101
    status: ready
    is_healthy: true
    load: 0
in_rotation:
  description: Whether the gateway lists the worker with C(is_healthy) true and status C(ready) (at the end of the run).
  returned: always
  type: bool
  sample: true
registered:
  description: Whether the gateway lists the worker in any status (at the end of the run).
  returned: always
  type: bool
  sample: true
healthy_workers:
  description: Workers the gateway lists as healthy and ready at the end of the run, null when it was not reached.
  returned: always
  type: int
  sample: 3
in_flight:
  description: The node's running plus queued requests at the last look, null when they were not read.
  returned: always
  type: int
  sample: 0
waited:
  description: Seconds the run took, waits included.
  returned: always
  type: float
  sample: 11.4
"""

import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import shown
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.node_load import NodeLoad
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.gateway import (
    Gateway, WorkerState, normalise_url, worker_url_problem,
)
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.server_module import http


# The gateway's and the node's metrics URLs may have a path (a gateway behind a proxy); a space or a
# control character makes no URL of them.
URL = re.compile(r'^https?://[^\x00-\x20\x7f/]+[^\x00-\x20\x7f]*\Z')


def read_key(path):
    with open(path) as handle:
        return handle.read().strip()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gateway_url=dict(type='str', required=True),
            api_key=dict(type='str', no_log=True),
            api_key_file=dict(type='path'),
            worker_url=dict(type='str', required=True),
            worker_api_key=dict(type='str', no_log=True),
            state=dict(type='str', default='present', choices=['present', 'absent', 'query']),
            metrics_url=dict(type='str'),
            drain_timeout=dict(type='int', default=300),
            healthy_timeout=dict(type='int', default=300),
            min_in_rotation=dict(type='int', default=1),
            poll_interval=dict(type='float', default=1.0),
            timeout=dict(type='int', default=10),
        ),
        mutually_exclusive=[('api_key', 'api_key_file')],
        required_one_of=[('api_key', 'api_key_file')],
        supports_check_mode=True,
    )
    params = module.params
    empty = {'changed': False, 'worker': None, 'in_rotation': False, 'registered': False, 'healthy_workers': None,
             'in_flight': None, 'waited': 0.0}
    problems = ['%s must be an http:// or https:// URL without spaces or control characters (got %s)'
                % (name, shown(params[name]))
                for name in ('gateway_url', 'metrics_url')
                if params[name] is not None and not URL.match(normalise_url(params[name]))]
    problems += [one for one in [worker_url_problem(params['worker_url'])] if one]
    problems += ['%s must be at least 0 (got %s)' % (name, params[name])
                 for name in ('drain_timeout', 'healthy_timeout', 'min_in_rotation') if params[name] < 0]
    problems += ['%s must be above 0 (got %s)' % (name, params[name])
                 for name in ('poll_interval', 'timeout') if params[name] <= 0]
    if problems:
        module.fail_json(msg='; '.join(problems), **empty)

    api_key = params['api_key']
    if params['api_key_file']:
        try:
            api_key = read_key(params['api_key_file'])
        except (IOError, OSError) as exc:
            module.fail_json(msg='cannot read api_key_file %s: %s' % (params['api_key_file'], exc), **empty)
        if api_key:
            module.no_log_values.add(api_key)
    if not api_key:
        module.fail_json(msg='the control-plane API key is empty (%s)' % (
            'api_key_file %s' % params['api_key_file'] if params['api_key_file'] else 'api_key'), **empty)

    metrics_url = params['metrics_url'] or normalise_url(params['worker_url']) + '/metrics'
    gateway = Gateway(http, params['gateway_url'], api_key, timeout=params['timeout'])
    metrics = NodeLoad(http, normalise_url(params['worker_url']), api_key=params['worker_api_key'],
                       metrics_url=metrics_url, timeout=params['timeout'])
    worker = WorkerState(gateway, metrics, params['worker_url'], worker_api_key=params['worker_api_key'],
                         drain_timeout=params['drain_timeout'], healthy_timeout=params['healthy_timeout'],
                         min_in_rotation=params['min_in_rotation'], poll_interval=params['poll_interval'],
                         check_mode=module.check_mode)
    result, failure = worker.run(params['state'])
    if failure:
        result['msg'] = failure
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
