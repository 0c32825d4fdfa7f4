# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The URL at which the gateway reaches each serving node (roles/sglang_gateway, rolling.yml's drain)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


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


def gateway_worker_urls(hosts, hostvars):
    """The worker URL of every host in hosts, in order."""
    if isinstance(hosts, str):
        hosts = [hosts]
    return [worker_url(host, hostvars) for host in hosts]


class FilterModule(object):
    """The gateway's filters."""

    def filters(self):
        return {
            'gateway_api_url': gateway_api_url,
            'gateway_worker_urls': gateway_worker_urls,
        }
