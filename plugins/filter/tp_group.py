# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Multi-node TP groups on the controller: the group checks, a member's plan and the roll's order, from
the facts each member published (module_utils/fleet/tp_group.py holds the logic and says what they are)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.gpu.plugins.module_utils.fleet import tp_group

# The facts the sglang_server role publishes on each member (tasks/validate.yml, validate_gpus.yml,
# revision.yml, gate.yml), by what the checks call them.
FACTS = {'view': 'sglang_server_tp_group_view', 'gpus': 'sglang_server_tp_group_gpus',
         'revision': 'sglang_server_tp_group_revision', 'outcome': 'sglang_server_tp_group_outcome'}
# about: (the fact it reads, the check), input reading the views alone.
ABOUT = {'gpus': ('gpus', tp_group.gpu_problems), 'revision': ('revision', tp_group.revision_problems),
         'start': ('outcome', tp_group.start_problems), 'outcome': ('outcome', tp_group.outcome_problems),
         'changing': ('outcome', tp_group.changing)}


def _fact(hostvars, host, name):
    try:
        return hostvars[host].get(FACTS[name])
    except KeyError:
        return None


def _views(hostvars, hosts, inventory=False):
    """{host: its published view}; with inventory, a host that published none gets one from its inventory variables."""
    views = {}
    for host in hosts:
        view = _fact(hostvars, host, 'view')
        if view is None and inventory and host in hostvars:
            view = tp_group.inventory_view(host, hostvars[host])
        if view is not None:
            views[host] = view
    return views


def _related(hostvars, host, groups, inventory=False):
    """This host and the members of the group its view names."""
    view = _views(hostvars, [host], inventory).get(host) or {}
    name = view.get('group') if isinstance(view, dict) else None
    return [host] + [one for one in groups.get(name, []) if one != host] if name and isinstance(name, str) else [host]


def tp_group_problems(hostvars, host, groups, play_hosts=None, about='input'):
    """The problems of `host`'s TP group: its input, its GPU counts, its revisions, a start's beginning or outcome;
    about=changing: the members that would restart on their own (module_utils/fleet/tp_group.py changing())."""
    if about != 'input' and about not in ABOUT:
        raise AnsibleFilterError('tp_group_problems: about must be one of input, %s, not %r' % (', '.join(ABOUT), about))
    hosts = _related(hostvars, host, groups)
    views = _views(hostvars, hosts)
    if about == 'input':
        return tp_group.problems(host, views, groups, list(play_hosts or []))
    fact, check = ABOUT[about]
    return check(host, views, groups, dict((one, _fact(hostvars, one, fact)) for one in hosts))


def tp_group_plan(hostvars, host, groups, inventory=False):
    """`host`'s place in its group ({} when it serves alone): rank, nnodes, members, leader, dist_init_addr, args.
    inventory: read the inventory's variables where a member published no view (verify.yml runs no role)."""
    hosts = _related(hostvars, host, groups, inventory)
    return tp_group.plan(host, _views(hostvars, hosts, inventory), groups)


def tp_group_roll_order(hostvars, hosts, groups, serial=1):
    """The roll's host order and batch sizes, a group being one batch member."""
    hosts = list(hosts)
    related = set(hosts)
    for host in hosts:
        related.update(_related(hostvars, host, groups))
    return tp_group.roll_order(hosts, _views(hostvars, sorted(related)), groups, serial)


class FilterModule(object):
    """Multi-node tensor-parallel groups."""

    def filters(self):
        return {'tp_group_problems': tp_group_problems, 'tp_group_plan': tp_group_plan,
                'tp_group_roll_order': tp_group_roll_order}
