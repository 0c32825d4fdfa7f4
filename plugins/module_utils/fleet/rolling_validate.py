# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling role's input checks (input_checks.py says how they are shaped).

The argument spec has refused unknown steps and values of the wrong type; these refuse what it
lets through: a string where a list belongs (the spec's list type splits it), relative paths,
numbers out of range and a gateway the drain cannot use. The default file list is made of the
server's paths, which the sglang_server role's checks (run before these) check.

rolling_serial is no variable of the role but playbooks/rolling.yml's batch size (its play keyword
serial, read from the extra vars): checked here, with the roll's input, so that a bad one stops the
check play before any change instead of the roll's own play. Not set is fine (one node at a time).
playbooks/converged.yml, the first play of site.yml and rolling.yml, runs these checks once more
outside the role and keeps rolling_serial's messages: the check play sees only the nodes that go
through the roles, and over a converged fleet that is none (issue 41: site.yml ignored -e
rolling_serial=0 there). So check_serial reads rolling_serial alone: outside the role the role's
own variables (its defaults and vars) are not set.

One probe: the gateway host's sglang_gateway_api_key (another host's variable, which validate.yml
reads from hostvars; rendering all of hostvars here would render every host's variables), as
probes['gateway_api_key'] (a string), absent when there is no gateway host in the inventory: then
no verdict on it.
"""

from __future__ import annotations

import re

from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import (
    DOT_SEGMENT,
    MISSING,
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
# serial's percentages: Ansible rounds a share down to a batch of at least one host, so 0% would
# roll one node and 150% every node at once.
PERCENT = re.compile(r'^([1-9][0-9]?|100)%\Z')
SERIAL_ALLOWED = ('a batch size: a whole number of at least 1 such as 2, a percentage of the hosts from 1% to 100% such '
                  'as "25%", or a list of those (one batch each, the last repeated); not set rolls one node at a time')
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
    'rolling_serial',
    '__rolling_steps_all',
    '__rolling_revision_file',
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
                    'a list of absolute file paths')
            + check_revision_not_kept(values))


def check_revision_not_kept(values):
    """The server's revision file is the sglang_server module's: it names what runs now, and the
    rollback compares it with the snapshot's revision to leave a server the roll never touched
    running. Put back from the snapshot, it would name the old revision while the new one runs."""
    files, revision = values['rolling_snapshot_files'], values['__rolling_revision_file']
    if not is_list(files) or not is_string(revision) or revision not in files:
        return []
    return [problem('rolling_snapshot_files', files, 'files the rollback puts back, not the server\'s revision file %s '
                    '(the sglang_server module keeps it: the rollback compares it with the revision of the snapshot)'
                    % revision)]


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


def _batch(value):
    return is_int(value, 1) or (is_string(value) and bool(PERCENT.match(value)))


# serial: 0 and negative numbers roll every host in one batch; a word ends the roll's play with
# Python's int() error, once the check play has passed.
def check_serial(values, probes):
    if values['rolling_serial'] is MISSING:
        return []
    return check('rolling_serial', values, lambda v: _batch(v) or (is_list(v) and len(v) > 0 and all(map(_batch, v))),
                 SERIAL_ALLOWED)


CHECKS = (check_lists, check_hooks, check_state_dir, check_gateway_host, check_numbers, check_serial)
