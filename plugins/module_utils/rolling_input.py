# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling role's input checks (input_checks.py says how they are shaped).

The argument spec has refused unknown steps and values of the wrong type; these refuse what it
lets through: a string where a list belongs (the spec's list type splits it), relative paths,
numbers out of range and a gateway the drain cannot use. The default file list is made of the
server's paths, which the sglang_server role's checks (run before these) check.

One probe: the gateway host's sglang_gateway_api_key (another host's variable, which validate.yml
reads from hostvars; rendering all of hostvars here would render every host's variables), as
probes['gateway_api_key'] (a string), absent when there is no gateway host in the inventory: then
no verdict on it.
"""

from __future__ import annotations

import re

from ansible_collections.inferops.gpu.plugins.module_utils.input_checks import (
    DOT_SEGMENT,
    as_bool,
    check,
    is_absolute_path,
    is_bool,
    is_int,
    is_list,
    is_string,
    problem,
)

# rolling_state_dir: its names are plain file names (the snapshot and converged.json live under it).
PLAIN_DIR = re.compile(r'^(/[A-Za-z0-9_.@+-]+)+\Z')
# The gateway's worker API, which the drain goes through, refuses a shorter key (sglang_gateway_input.KEY_MIN).
KEY_MIN = 16
NUMBERS = (
    ('rolling_drain_timeout', 1, 'whole seconds, at least 1'),
    ('rolling_gateway_healthy_timeout', 1, 'whole seconds, at least 1'),
    ('rolling_gateway_min_in_rotation', 0, 'a whole number, 0 or more'),
)

NAMES = (
    'rolling_steps',
    'rolling_drain_tasks',
    'rolling_undrain_tasks',
    'rolling_state_dir',
    'rolling_snapshot_files',
    'rolling_gateway_host',
    'rolling_drain_timeout',
    'rolling_gateway_healthy_timeout',
    'rolling_gateway_min_in_rotation',
    '__rolling_steps_all',
    'sglang_server_enable_metrics',
    'groups',
)


def _hook(value):
    return value == '' or is_absolute_path(value)


def check_hooks(values, probes):
    return (check('rolling_drain_tasks', values, _hook, 'the absolute path of a task file, or "" for none')
            + check('rolling_undrain_tasks', values, _hook, 'the absolute path of a task file, or "" for none'))


def check_state_dir(values, probes):
    return check('rolling_state_dir', values, lambda v: PLAIN_DIR.match(v) and not DOT_SEGMENT.search(v),
                 'an absolute directory path of plain names (A-Z, a-z, 0-9, _ . @ + -; no . or .. segments)')


def check_lists(values, probes):
    return (check('rolling_steps', values, is_list,
                  'a list of roles from %s (run in that order)' % ', '.join(values['__rolling_steps_all'] or []))
            + check('rolling_snapshot_files', values, lambda v: is_list(v) and all(is_absolute_path(one) for one in v),
                    'a list of absolute file paths'))


def check_gateway_host(values, probes):
    host = values['rolling_gateway_host']
    if host == '':
        return []
    if not is_string(host):
        return [problem('rolling_gateway_host', host, 'a host of the inventory that runs the sglang_gateway role, '
                        'or "" for none')]
    found = []
    inventory = (values['groups'] or {}).get('all', [])
    if host not in inventory:
        found.append(problem('rolling_gateway_host', host, 'a host of the inventory that runs the sglang_gateway '
                             'role, or "" for none'))
    steps = values['rolling_steps']
    metrics = values['sglang_server_enable_metrics']
    # A value that is not a boolean is the sglang_server role's own check's to name.
    if is_list(steps) and 'sglang_server' in steps and is_bool(metrics) and not as_bool(metrics):
        found.append(problem('rolling_gateway_host', host, 'a gateway only with sglang_server_enable_metrics true '
                             '(the drain reads the node\'s in-flight requests from its /metrics), or ""'))
    key = probes.get('gateway_api_key')
    if isinstance(key, str) and len(key) < KEY_MIN:
        found.append(problem('rolling_gateway_host', host, 'a gateway host with its sglang_gateway_api_key set '
                             '(at least %d characters: the drain uses its worker API), or ""' % KEY_MIN))
    return found


def check_numbers(values, probes):
    found = []
    for name, low, allowed in NUMBERS:
        found.extend(check(name, values, lambda v, low=low: is_int(v, low), allowed))
    return found


CHECKS = (check_lists, check_hooks, check_state_dir, check_gateway_host, check_numbers)
