# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""host_pattern: a play's hosts from groups that may not exist (yet).

The playbooks sort hosts into groups at run time (group_by: inferops_pending, inferops_new,
inferops_serving) and may run on inventories without a group sglang_gateway. A host pattern that
names a group no host is in makes Ansible warn "Could not match supplied host pattern" on every
run, a warning an operator would have to learn to ignore; this names the hosts instead, or a
pattern that matches nothing without a warning.
"""

from __future__ import annotations

NOTHING = 'all:!all'


def host_pattern(groups, include=('all',), exclude=()):
    """The hosts of the groups in include, less those of the groups in exclude, as a pattern."""
    include = [include] if isinstance(include, str) else list(include)
    exclude = [exclude] if isinstance(exclude, str) else list(exclude)
    left_out = set(host for name in exclude for host in groups.get(name, []))
    hosts = []
    for name in include:
        for host in groups.get(name, []):
            if host not in left_out and host not in hosts:
                hosts.append(host)
    return ','.join(hosts) or NOTHING


class FilterModule(object):
    """Host patterns."""

    def filters(self):
        return {'host_pattern': host_pattern}
