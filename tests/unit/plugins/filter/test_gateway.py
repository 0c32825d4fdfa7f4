# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the gateway reaches each node, and where a process on the gateway host reaches the gateway."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.gpu.plugins.filter.gateway import FilterModule, gateway_api_url, gateway_worker_urls

HOSTVARS = {
    'node-1': {'ansible_host': '10.0.0.11'},
    'node-2': {'ansible_host': '10.0.0.12', 'sglang_server_port': 31000},
    'node-3': {'sglang_gateway_worker_url': 'https://node-3.example:443/'},
    'node-4': {},
    'node-6': {'ansible_host': 'fd00::6', 'sglang_server_port': None},
}


def test_each_node_at_its_address_and_server_port_in_order():
    assert gateway_worker_urls(['node-2', 'node-1', 'node-3', 'node-4', 'node-6'], HOSTVARS) == [
        'http://10.0.0.12:31000', 'http://10.0.0.11:30000', 'https://node-3.example:443', 'http://node-4:30000',
        'http://[fd00::6]:30000']


def test_one_host_name_and_no_hosts():
    assert gateway_worker_urls('node-1', HOSTVARS) == ['http://10.0.0.11:30000']
    assert gateway_worker_urls([], HOSTVARS) == []


def test_only_rank_0_of_a_tp_group_is_a_worker():
    hostvars = dict(HOSTVARS, **{'kimi-b': {'sglang_server_tp_group': 'kimi'}, 'kimi-a': {'sglang_server_tp_group': 'kimi'}})
    groups = {'all': list(hostvars), 'kimi': ['kimi-b', 'kimi-a']}
    hosts = ['node-1', 'kimi-a', 'kimi-b']
    # rank 0 by the inventory group's order
    assert gateway_worker_urls(hosts, hostvars, groups) == ['http://10.0.0.11:30000', 'http://kimi-b:30000']
    # by the ranks every member sets
    hostvars['kimi-a']['sglang_server_tp_group_rank'] = 0
    hostvars['kimi-b']['sglang_server_tp_group_rank'] = 1
    assert gateway_worker_urls(hosts, hostvars, groups) == ['http://10.0.0.11:30000', 'http://kimi-a:30000']
    # without groups every host is listed, as before
    assert len(gateway_worker_urls(hosts, hostvars)) == 3


def test_a_host_outside_the_inventory_is_named():
    with pytest.raises(AnsibleFilterError, match="'node-9' is not a host of the inventory"):
        gateway_worker_urls(['node-9'], HOSTVARS)


@pytest.mark.parametrize('values, url', [
    ({}, 'http://127.0.0.1:30080'),
    ({'sglang_gateway_host': '0.0.0.0', 'sglang_gateway_port': 8080}, 'http://127.0.0.1:8080'),
    ({'sglang_gateway_host': '::'}, 'http://[::1]:30080'),
    ({'sglang_gateway_host': '10.0.0.5', 'sglang_gateway_port': '30081'}, 'http://10.0.0.5:30081'),
    ({'sglang_gateway_host': 'fd00::5'}, 'http://[fd00::5]:30080'),
])
def test_the_gateway_as_its_own_host_reaches_it(values, url):
    assert gateway_api_url(values) == url


def test_filters_are_registered():
    assert set(FilterModule().filters()) == {'gateway_api_url', 'gateway_worker_urls'}
