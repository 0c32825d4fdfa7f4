# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""host_pattern against Ansible's own inventory: the pattern it returns matches the hosts meant and
never makes Ansible warn about a group that does not exist."""

from __future__ import annotations

import pytest
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.utils.display import Display

from ansible_collections.inferops.gpu.plugins.filter.hosts import host_pattern

GROUPS = {'all': ['a', 'b', 'gw'], 'ungrouped': [], 'inferops_pending': ['b', 'a'], 'sglang_gateway': ['gw']}


@pytest.fixture
def inventory():
    manager = InventoryManager(loader=DataLoader(), sources='a,b,gw,')
    manager.add_group('sglang_gateway')
    manager.add_host('gw', group='sglang_gateway')
    return manager


@pytest.fixture
def warnings(monkeypatch):
    said = []
    monkeypatch.setattr(Display, 'warning', lambda self, msg, *args, **kwargs: said.append(msg))
    return said


@pytest.mark.parametrize('include, exclude, expected', [
    (['inferops_pending'], [], ['b', 'a']),
    (['inferops_pending', 'sglang_gateway'], [], ['b', 'a', 'gw']),
    (['all'], ['sglang_gateway'], ['a', 'b']),
    (['inferops_new'], [], []),
    (['inferops_serving', 'inferops_new'], ['nowhere'], []),
])
def test_the_pattern_matches_the_hosts_meant_without_a_warning(inventory, warnings, include, exclude, expected):
    pattern = host_pattern(GROUPS, include, exclude)
    assert [h.name for h in inventory.get_hosts(pattern)] == expected
    assert warnings == []


def test_a_missing_group_in_a_plain_pattern_warns(inventory, warnings):
    # What the playbooks did before: Ansible warns for the group group_by never made.
    inventory.get_hosts('inferops_serving')
    assert any('Could not match supplied host pattern' in w for w in warnings), warnings


def test_one_group_may_be_given_as_a_string():
    assert host_pattern(GROUPS, 'sglang_gateway') == 'gw'
    assert host_pattern(GROUPS, exclude='sglang_gateway') == 'a,b,gw'.replace(',gw', '')
