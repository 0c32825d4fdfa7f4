# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_gateway role's input checks (input_checks.py says how they are shaped).

The argument spec has checked the types and the choices (state, profile, policy); these refuse what
it lets through before the role installs or restarts anything: paths, names and addresses that go
into the unit and smg's arguments, ports and the health, circuit breaker and retry settings out of
range, worker URLs that are no worker's, and keys that cannot go into an HTTP header. The rules of
names, addresses, paths and keys are the sglang_server role's (the same unit and header).
"""

from __future__ import annotations

import re

from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import (
    CONTROL, check, is_int, is_list, is_port, problem, shown,
)
from ansible_collections.inferops.gpu.plugins.module_utils._common.network_input import INDEX_URL
# The worker URL's rule is the module's (sglang_gateway_worker), which rolling.yml drains through.
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.gateway import WORKER_URL_ALLOWED, is_worker_url
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.server_validate import (
    HOST, PATH_ALLOWED, SECRET as KEY_TEXT, account_checks, is_path, unit_name_check,
)

# The worker API, which rolling.yml drains through, refuses requests without a key.
KEY_MIN = 16
# smg appends it to each worker's URL for the health check.
ENDPOINT = re.compile(r'^/[A-Za-z0-9_.~/-]*\Z')
# Addresses that bind every interface: a port there is taken on every address.
WILDCARD = ('0.0.0.0', '::')
PATHS = ('sglang_gateway_root', 'sglang_gateway_path', 'sglang_gateway_python_interpreter', 'sglang_gateway_config_dir')
ADDRESSES = ('sglang_gateway_host', 'sglang_gateway_metrics_host')
PORTS = ('sglang_gateway_port', 'sglang_gateway_metrics_port')
# Both go into an HTTP header (Authorization: Bearer) and a JSON file; never shown (secret names).
KEYS = (
    ('sglang_gateway_api_key', 'a string of printable ASCII without spaces (it goes into an HTTP header), at least %d '
                               'characters while the gateway is started' % KEY_MIN),
    ('sglang_gateway_worker_api_key', 'a string of printable ASCII without spaces (it goes into an HTTP header), or "" '
                                      'for none'),
)
# Seconds and counts smg reads, and the role's own waits: each at least 1, as the argument spec
# documents (its int type lets 0 and negative numbers through).
NUMBERS = (
    'sglang_gateway_health_check_interval',
    'sglang_gateway_health_check_timeout',
    'sglang_gateway_health_failure_threshold',
    'sglang_gateway_health_success_threshold',
    'sglang_gateway_cb_failure_threshold',
    'sglang_gateway_cb_success_threshold',
    'sglang_gateway_cb_timeout',
    'sglang_gateway_cb_window',
    'sglang_gateway_retry_max_retries',
    'sglang_gateway_request_timeout',
    'sglang_gateway_start_timeout',
    'sglang_gateway_command_timeout',
)

NAMES = (
    'sglang_gateway_state',
    'sglang_gateway_workers',
    'sglang_gateway_extra_args',
    'sglang_gateway_index_url',
    'sglang_gateway_user',
    'sglang_gateway_group',
    'sglang_gateway_unit_name',
    'sglang_gateway_health_check_endpoint',
    '__sglang_gateway_owned_args',
) + PATHS + ADDRESSES + PORTS + tuple(name for name, _allowed in KEYS) + NUMBERS


def check_workers(values, probes):
    # As written: the list goes into smg's argv, where a trailing blank would make another URL.
    workers = values['sglang_gateway_workers']
    if not is_list(workers):
        return [problem('sglang_gateway_workers', workers, 'a list of http(s)://host:port URLs such as '
                        'http://10.0.0.11:30000')]
    return [problem('sglang_gateway_workers[%d]' % index, url, WORKER_URL_ALLOWED)
            for index, url in enumerate(workers) if not is_worker_url(url)]


def _key_text(value):
    return isinstance(value, str) and bool(KEY_TEXT.match(value))


def check_api_key(values, probes):
    key = values['sglang_gateway_api_key']
    # A key that is no such string is check_key_text's to name.
    if values['sglang_gateway_state'] != 'started' or not _key_text(key) or len(key) >= KEY_MIN:
        return []
    return [problem('sglang_gateway_api_key', key, 'a key of at least %d characters while the gateway is started (the '
                    'worker API, which rolling.yml drains through, is refused without it)' % KEY_MIN)]


def check_key_text(values, probes):
    found = []
    for name, allowed in KEYS:
        found.extend(check(name, values, _key_text, allowed))
    return found


def check_extra_args(values, probes):
    owned = values['__sglang_gateway_owned_args'] or []
    extra = values['sglang_gateway_extra_args']
    if not is_list(extra):
        return [problem('sglang_gateway_extra_args', extra, 'a list of arguments')]
    found = [problem('sglang_gateway_extra_args[%d]' % index, arg, 'a string or a number on one line (one argv word)')
             for index, arg in enumerate(extra)
             if isinstance(arg, bool) or not isinstance(arg, (str, int, float)) or CONTROL.search(str(arg))]
    taken = [arg for arg in extra if arg in owned]
    if taken:
        found.append(problem('sglang_gateway_extra_args', extra, 'arguments the role does not own (%s: set the role\'s '
                             'variable instead)' % ', '.join(taken)))
    return found


def check_paths(values, probes):
    # Each goes into the unit's ExecStart= (or makes a path that does), which splits on spaces.
    found = []
    for name in PATHS:
        found.extend(check(name, values, is_path, PATH_ALLOWED))
    return found


def check_index_url(values, probes):
    return check('sglang_gateway_index_url', values, lambda v: bool(INDEX_URL.match(v)),
                 'the package index the lock is installed from, an http(s):// or file:// URL on one line without '
                 'spaces, such as https://pypi.org/simple')


def check_accounts(values, probes):
    return account_checks(values, 'sglang_gateway_user', 'sglang_gateway_group')


def check_unit_name(values, probes):
    return unit_name_check(values, 'sglang_gateway_unit_name', 'sglang-gateway')


def check_addresses(values, probes):
    found = []
    for name in ADDRESSES:
        found.extend(check(name, values, lambda v: bool(HOST.match(v)),
                           'an IP address or a host name to bind (letters, digits and . : _ -), such as 127.0.0.1 '
                           'or 0.0.0.0'))
    return found


def check_ports(values, probes):
    found = []
    for name in PORTS:
        found.extend(check(name, values, is_port, 'a port number from 1 to 65535'))
    port, metrics_port = values['sglang_gateway_port'], values['sglang_gateway_metrics_port']
    host, metrics_host = values['sglang_gateway_host'], values['sglang_gateway_metrics_host']
    if not found and int(port) == int(metrics_port) and (host == metrics_host or host in WILDCARD
                                                         or metrics_host in WILDCARD):
        found.append(problem('sglang_gateway_metrics_port', metrics_port, 'a port other than sglang_gateway_port (%s) '
                             'on the same address: the gateway binds both' % shown(port)))
    return found


def check_numbers(values, probes):
    found = []
    for name in NUMBERS:
        found.extend(check(name, values, lambda v: is_int(v, 1), 'a whole number of at least 1'))
    return found


def check_health_check_endpoint(values, probes):
    return check('sglang_gateway_health_check_endpoint', values, lambda v: bool(ENDPOINT.match(v)),
                 'a path of the nodes\' servers, starting with / (letters, digits and / _ . ~ -), such as /health or '
                 '/health_generate')


CHECKS = (check_workers, check_api_key, check_key_text, check_extra_args, check_paths, check_index_url, check_accounts,
          check_unit_name, check_addresses, check_ports, check_numbers, check_health_check_endpoint)
