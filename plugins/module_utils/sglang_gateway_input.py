# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_gateway role's input checks (input_checks.py says how they are shaped)."""

from __future__ import annotations

import re

from ansible_collections.inferops.gpu.plugins.module_utils.input_checks import check, is_list, problem

WORKER_URL = re.compile(r'^https?://[^/\s]+/?\Z')
# The worker API, which rolling.yml drains through, refuses requests without a key.
KEY_MIN = 16

NAMES = (
    'sglang_gateway_state',
    'sglang_gateway_workers',
    'sglang_gateway_api_key',
    'sglang_gateway_extra_args',
    '__sglang_gateway_owned_args',
)


def check_workers(values, probes):
    return check('sglang_gateway_workers', values,
                 lambda v: is_list(v) and all(isinstance(url, str) and WORKER_URL.match(url) for url in v),
                 'a list of http(s)://host:port URLs such as http://10.0.0.11:30000')


def check_api_key(values, probes):
    if values['sglang_gateway_state'] != 'started':
        return []
    return check('sglang_gateway_api_key', values, lambda v: isinstance(v, str) and len(v) >= KEY_MIN,
                 'a key of at least %d characters while the gateway is started (the worker API, which rolling.yml '
                 'drains through, is refused without it)' % KEY_MIN)


def check_extra_args(values, probes):
    owned = values['__sglang_gateway_owned_args'] or []
    extra = values['sglang_gateway_extra_args']
    if not is_list(extra):
        return [problem('sglang_gateway_extra_args', extra, 'a list of arguments')]
    taken = [arg for arg in extra if arg in owned]
    return [problem('sglang_gateway_extra_args', extra, 'arguments the role does not own (%s: set the role\'s '
                    'variable instead)' % ', '.join(taken))] if taken else []


CHECKS = (check_workers, check_api_key, check_extra_args)
