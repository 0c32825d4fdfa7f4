# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The URL at which the gateway reaches each serving node (roles/sglang_gateway, rolling.yml's drain)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.gpu.plugins.module_utils.fleet import tp_group


def _get(values, name, default):
    try:
        value = values[name]
    except (KeyError, TypeError):
        return default
    return default if value is None else value


def worker_url(host, hostvars):
    """A host's own sglang_gateway_worker_url, else http://<ansible_host>:<sglang_server_port>."""
    try:
        values = hostvars[host]
    except KeyError:
        raise AnsibleFilterError('gateway_worker_urls: %r is not a host of the inventory' % (host,))
    url = _get(values, 'sglang_gateway_worker_url', '')
    if url:
        return str(url).rstrip('/')
    address = str(_get(values, 'ansible_host', '') or host)
    if ':' in address and not address.startswith('['):
        address = '[%s]' % address
    return 'http://%s:%s' % (address, _get(values, 'sglang_server_port', 30000))


def gateway_api_url(values):
    """The gateway's own address as a process on its host reaches it: a wildcard bind on loopback."""
    host = str(_get(values, 'sglang_gateway_host', '127.0.0.1') or '127.0.0.1')
    host = {'0.0.0.0': '127.0.0.1', '::': '::1'}.get(host, host)
    if ':' in host and not host.startswith('['):
        host = '[%s]' % host
    return 'http://%s:%s' % (host, _get(values, 'sglang_gateway_port', 30080))


def follower(host, hostvars, groups):
    """Whether the host is a rank >= 1 of a multi-node TP group (module_utils/fleet/tp_group.py): SGLang serves
    HTTP on rank 0 only, the others answer health from a dummy server. Read from the inventory's variables
    (sglang_server_tp_group, sglang_server_tp_group_rank), which the gateway's play sees without the group's facts."""
    name = tp_group.inventory_view(host, hostvars[host])['group']
    if not name or not isinstance(name, str):
        return False
    views = dict((one, tp_group.inventory_view(one, hostvars[one])) for one in groups.get(name, []) if one in hostvars)
    return tp_group.plan(host, views, groups).get('rank', 0) != 0


def gateway_worker_urls(hosts, hostvars, groups=None):
    """The worker URL of every host in hosts, in order; with groups, the followers of TP groups left out."""
    if isinstance(hosts, str):
        hosts = [hosts]
    for host in hosts:
        if host not in hostvars:
            raise AnsibleFilterError('gateway_worker_urls: %r is not a host of the inventory' % (host,))
    return [worker_url(host, hostvars) for host in hosts if not groups or not follower(host, hostvars, groups)]


class FilterModule(object):
    """The gateway's filters."""

    def filters(self):
        return {
            'gateway_api_url': gateway_api_url,
            'gateway_worker_urls': gateway_worker_urls,
        }
