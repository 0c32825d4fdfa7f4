# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What tests/bad_inputs/rolling.yml does not pin: the gateway host's conditions (an inventory
host, the node's metrics, the gateway's key as validate.yml reads it from hostvars), the values
2.17 renders as strings, the path rules and the edges of rolling_serial (the play's batch size)."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.fleet import rolling_validate as ri
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import MISSING, run_checks

GATEWAY = 'gw-1'
KEY = '0123456789abcdef'
DEFAULTS = {
    'rolling_steps': ['cuda_toolkit', 'ml_env', 'runtime_env', 'gpu_health', 'sglang_server'],
    'rolling_drain_tasks': '',
    'rolling_undrain_tasks': '',
    'rolling_state_dir': '/var/lib/inferops/rolling',
    'rolling_snapshot_files': ['/etc/systemd/system/sglang-server.service', '/etc/sglang/sglang-server.yaml'],
    'rolling_gateway_host': '',
    'rolling_drain_timeout': 300,
    'rolling_gateway_healthy_timeout': 300,
    'rolling_gateway_min_in_rotation': 1,
    'rolling_serial': MISSING,
    '__rolling_steps_all': ['cuda_toolkit', 'ml_env', 'runtime_env', 'gpu_health', 'sglang_server'],
    '__rolling_revision_file': '/var/log/sglang/revision',
    'sglang_server_enable_metrics': MISSING,
    'groups': {'all': ['node-1', GATEWAY], 'sglang_gateway': [GATEWAY]},
}


def problems(probes=None, **changed):
    assert set(changed) <= set(ri.NAMES)
    return run_checks(ri.CHECKS, dict(DEFAULTS, **changed), probes)


def test_the_servers_revision_file_is_not_put_back_by_the_snapshot():
    files = ['/etc/systemd/system/sglang-server.service', '/var/log/sglang/revision']
    assert problems(rolling_snapshot_files=files) == [
        'rolling_snapshot_files = ["/etc/systemd/system/sglang-server.service", "/var/log/sglang/revision"] is not '
        "allowed: files the rollback puts back, not the server's revision file /var/log/sglang/revision (the "
        'sglang_server module keeps it: the rollback compares it with the revision of the snapshot)']


def test_defaults_pass_and_every_name_is_read():
    assert sorted(DEFAULTS) == sorted(ri.NAMES)
    assert problems() == []


@pytest.mark.parametrize('probes, changed', [
    ({'gateway_api_key': KEY}, {'rolling_gateway_host': GATEWAY}),
    ({'gateway_api_key': KEY}, {'rolling_gateway_host': GATEWAY, 'sglang_server_enable_metrics': 'True'}),
    # A node the roll does not restart the server of needs no metrics.
    ({'gateway_api_key': KEY}, {'rolling_gateway_host': GATEWAY, 'sglang_server_enable_metrics': False,
                                'rolling_steps': ['ml_env']}),
    # No probe (a skipped one, or the unit table's), no verdict on the key.
    ({}, {'rolling_gateway_host': GATEWAY}),
    ({'gateway_api_key': {'skipped': True}}, {'rolling_gateway_host': GATEWAY}),
    # A value that is not a boolean is the sglang_server role's check's to name.
    ({'gateway_api_key': KEY}, {'rolling_gateway_host': GATEWAY, 'sglang_server_enable_metrics': 'maybe'}),
    ({}, {'rolling_drain_timeout': '60', 'rolling_gateway_min_in_rotation': '0'}),  # as 2.17 renders templates
    ({}, {'rolling_state_dir': '/srv/inferops@1/roll.d'}),
])
def test_accepted(probes, changed):
    assert problems(probes, **changed) == []


@pytest.mark.parametrize('probes, changed, expected', [
    ({'gateway_api_key': 'short'}, {'rolling_gateway_host': GATEWAY},
     'rolling_gateway_host = "gw-1" is not allowed: a gateway host with its sglang_gateway_api_key set'),
    ({'gateway_api_key': ''}, {'rolling_gateway_host': GATEWAY}, 'rolling_gateway_host = "gw-1" is not allowed'),
    ({'gateway_api_key': KEY}, {'rolling_gateway_host': GATEWAY, 'sglang_server_enable_metrics': 'false'},
     'rolling_gateway_host = "gw-1" is not allowed: a gateway only with sglang_server_enable_metrics true'),
    ({}, {'rolling_gateway_host': ['gw-1']}, 'rolling_gateway_host = ["gw-1"] is not allowed: a host of the inventory'),
    ({}, {'rolling_steps': 'ml_env,sglang_server'}, 'rolling_steps = "ml_env,sglang_server" is not allowed: a list of roles'),
    ({}, {'rolling_state_dir': '/var/lib/../rolling'}, 'rolling_state_dir = "/var/lib/../rolling" is not allowed'),
    ({}, {'rolling_state_dir': '/var/lib/my rolling'}, 'rolling_state_dir = "/var/lib/my rolling" is not allowed'),
    ({}, {'rolling_state_dir': '/var/lib/rolling\n'}, 'rolling_state_dir = "/var/lib/rolling\\n" is not allowed'),
    ({}, {'rolling_drain_tasks': '/etc/inferops/drain.yml\n'}, 'rolling_drain_tasks = "/etc/inferops/drain.yml\\n"'),
    ({}, {'rolling_snapshot_files': ['/etc/a', 5]}, 'rolling_snapshot_files = ["/etc/a", 5] is not allowed'),
    ({}, {'rolling_gateway_healthy_timeout': True}, 'rolling_gateway_healthy_timeout = true is not allowed'),
])
def test_refused(probes, changed, expected):
    found = problems(probes, **changed)
    assert len(found) == 1 and found[0].startswith(expected), found
    assert KEY not in found[0] and 'short' not in found[0]


def test_a_gateway_outside_the_inventory_with_every_problem():
    found = problems({'gateway_api_key': 'short'}, rolling_gateway_host='gw-9', sglang_server_enable_metrics=False)
    assert len(found) == 3 and all(message.startswith('rolling_gateway_host = "gw-9" is not allowed') for message in found)


@pytest.mark.parametrize('serial', [MISSING, 1, '1', 12, '01', '1%', '25%', '100%', [1, '50%'], ['10%', 2, '100%']])
def test_serial_accepted(serial):
    assert problems(rolling_serial=serial) == []


# 0, negative numbers and an empty list roll every node at once; a share under 1% or over 100% is
# one node or all of them whatever it says; the rest ends the roll's play in int().
@pytest.mark.parametrize('serial', [0, '0', -1, '-1', True, 2.5, '2.5', ' 2', '2 ', '0%', '101%', '25 %', '25.5%', '%',
                                    '', None, [], [2, 0], [[1]], {'size': 2}])
def test_serial_refused(serial):
    found = problems(rolling_serial=serial)
    assert len(found) == 1 and found[0].startswith('rolling_serial = ') and ri.SERIAL_ALLOWED in found[0], found
