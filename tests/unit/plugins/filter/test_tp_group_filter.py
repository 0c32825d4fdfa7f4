# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The TP group filters read the members' published facts out of hostvars (the logic: test_tp_group.py)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.gpu.plugins.filter.tp_group import FilterModule, tp_group_plan, tp_group_problems, tp_group_roll_order

GROUPS = {'all': ['k-a', 'k-b', 'solo'], 'kimi': ['k-a', 'k-b']}


def published(**facts):
    view = {'group': 'kimi', 'rank': None, 'address': '', 'port': 50000, 'args': ['--tp', '2'], 'model_path': '/m',
            'state': 'started'}
    hostvars = {'k-a': {'sglang_server_tp_group_view': dict(view, address='k-a')},
                'k-b': {'sglang_server_tp_group_view': dict(view, address='k-b')},
                'solo': {}}
    for host, values in facts.items():
        hostvars[host].update(values)
    return hostvars


def test_the_plan_and_the_input_from_the_published_views():
    hostvars = published()
    assert tp_group_problems(hostvars, 'k-b', GROUPS, ['k-a', 'k-b']) == []
    assert tp_group_plan(hostvars, 'k-b', GROUPS)['args'] == ['--nnodes', '2', '--node-rank', '1', '--dist-init-addr', 'k-a:50000']
    assert tp_group_plan(hostvars, 'solo', GROUPS) == {}
    assert tp_group_problems(hostvars, 'solo', GROUPS, ['solo']) == []


def test_gpus_revision_and_outcome_facts():
    hostvars = published(**{'k-a': {'sglang_server_tp_group_gpus': 8, 'sglang_server_tp_group_revision': 'r1',
                                    'sglang_server_tp_group_outcome': {'ready': True}},
                            'k-b': {'sglang_server_tp_group_gpus': 4, 'sglang_server_tp_group_revision': 'r2',
                                    'sglang_server_tp_group_outcome': {'ready': False, 'cause': 'rank_crash', 'msg': 'x'}}})
    assert 'k-a: 8, k-b: 4' in tp_group_problems(hostvars, 'k-a', GROUPS, about='gpus')[0]
    assert 'k-a: r1, k-b: r2' in tp_group_problems(hostvars, 'k-a', GROUPS, about='revision')[0]
    assert tp_group_problems(hostvars, 'k-a', GROUPS, about='outcome') == [
        'group kimi did not start: rank 1 (k-b) cause rank_crash: x']
    with pytest.raises(AnsibleFilterError, match='about must be one of input, gpus, revision, start, outcome, changing'):
        tp_group_problems(hostvars, 'k-a', GROUPS, about='nope')


def test_the_roll_order():
    order = tp_group_roll_order(published(), ['k-b', 'solo', 'k-a'], GROUPS, 1)
    assert order == {'hosts': ['k-a', 'k-b', 'solo'], 'serial': [2, 1]}


def test_filters_are_registered():
    assert set(FilterModule().filters()) == {'tp_group_problems', 'tp_group_plan', 'tp_group_roll_order'}
