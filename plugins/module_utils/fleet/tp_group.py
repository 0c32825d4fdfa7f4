# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Multi-node tensor-parallel groups: several hosts that serve one model together, as one unit.

A group is an inventory group whose members set sglang_server_tp_group to its name (group_vars of that
group, usually). Each member's rank is sglang_server_tp_group_rank where every member sets one, else its
place in the inventory group. SGLang runs one launch per member with --nnodes, --node-rank and
--dist-init-addr (rank 0's address and the group's port); rank 0 serves HTTP, the other ranks run a
dummy health server (sglang/srt/entrypoints/engine.py, _launch_subprocesses).

Each member publishes what it would run (its "view", the role's validate.yml renders it in the
member's own context, role defaults included) and these functions judge the group from the views:
- problems(): before any change, the group is whole, in this run, ranked 0..N-1 and agrees on the
  port, the model, the state and the server's arguments;
- gpu_problems(), revision_problems(): the same GPU count and the same server revision on every member;
- plan(): this member's rank, the members by rank and the arguments the role adds;
- roll_order(): the roll's host order and batch sizes, a group counting as one batch member;
- changing(), start_problems(), outcome_problems(): a start of the group, one for all: every member
  restarts when one would, none starts unless all got there, and after the gates which did not serve and why.
Messages name the variable, the value and what is allowed, as the roles' input checks do.
"""

from __future__ import annotations

import re

from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import is_int, is_port, is_string, problem

# The options the role sets for a member of a group (and their aliases: argparse also takes any unique prefix).
GROUP_OPTIONS = ('--nnodes', '--node-rank', '--dist-init-addr', '--nccl-init-addr')
# Ansible's group names (inventory/group.py to_safe_group_name keeps these).
GROUP_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*\Z')
# A host name or an IPv4 address: the address goes into --dist-init-addr HOST:PORT as is.
ADDRESS = re.compile(r'^[A-Za-z0-9_.-]+\Z')
# What the members must agree on, as (view key, variable).
SAME = (('port', 'sglang_server_tp_group_port'), ('model_path', 'sglang_server_model_path'),
        ('state', 'sglang_server_state'), ('args', 'sglang_server_args + sglang_server_extra_args'))


def inventory_view(host, values):
    """A member's view from its inventory variables alone (values: a mapping of them), for readers that run
    without the role's facts (the gateway's worker list, verify.yml): enough for the ranks, not for the checks."""
    def get(name, default=None):
        try:
            value = values[name]
        except (KeyError, TypeError):
            return default
        return default if value is None else value
    return {'group': get('sglang_server_tp_group', ''), 'rank': get('sglang_server_tp_group_rank'),
            'address': get('sglang_server_tp_group_address') or get('ansible_host') or host,
            'port': get('sglang_server_tp_group_port')}


def _name(view):
    return (view or {}).get('group') or ''


def members(name, groups):
    """The inventory group's hosts, in inventory order."""
    return list(groups.get(name) or [])


def ranked(name, views, groups):
    """The members by rank: explicit ranks when every member sets one, else inventory order."""
    hosts = members(name, groups)
    ranks = [(views.get(host) or {}).get('rank') for host in hosts]
    if hosts and all(is_int(rank, 0) for rank in ranks):
        return [host for _rank, host in sorted(zip([int(rank) for rank in ranks], hosts))]
    return hosts


def _option_problems(args):
    found = []
    for word in args if isinstance(args, (list, tuple)) else []:
        option = str(word).split('=', 1)[0]
        if len(option) > 2 and option.startswith('--'):
            for owned in GROUP_OPTIONS:
                if owned.startswith(option):
                    found.append(problem('sglang_server_args', word, 'no %s in the arguments of a member of a TP group: the role '
                                         'sets --nnodes, --node-rank and --dist-init-addr from sglang_server_tp_group' % owned))
                    break
    return found


def _sizes(args):
    """(tp, pp) as the last --tp/--pp given says (SGLang's spellings), 1 when absent or not a number."""
    sizes = {'tp': 1, 'pp': 1}
    names = {'--tp': 'tp', '--tp-size': 'tp', '--tensor-parallel-size': 'tp',
             '--pp': 'pp', '--pp-size': 'pp', '--pipeline-parallel-size': 'pp'}
    want = None
    for word in [str(one) for one in args or []]:
        if want:
            sizes[want], want = int(word) if is_int(word, 1) else sizes[want], None
        elif word in names:
            want = names[word]
        elif '=' in word and word.split('=', 1)[0] in names:
            value = word.split('=', 1)[1]
            sizes[names[word.split('=', 1)[0]]] = int(value) if is_int(value, 1) else 1
    return sizes['tp'], sizes['pp']


def problems(host, views, groups, play_hosts):
    """Every problem of `host`'s group; [] for a host in no group. views: {host: view} of the hosts that
    published one (the group's members at least); play_hosts: every host of this run."""
    view = views.get(host) or {}
    name = _name(view)
    if not name:
        return []
    if not is_string(name) or not GROUP_NAME.match(name):
        return [problem('sglang_server_tp_group', name, 'the name of an inventory group (letters, digits, _) whose hosts serve '
                        'one model together, or "" for a host that serves alone')]
    hosts = members(name, groups)
    if host not in hosts:
        return [problem('sglang_server_tp_group', name, 'an inventory group that %s is in (its members are %s)'
                        % (host, ', '.join(hosts) or 'none: no such group'))]
    found = []
    if len(hosts) < 2:
        found.append(problem('sglang_server_tp_group', name, 'a group of at least 2 hosts (%s has only %s); a host that serves '
                             'alone sets sglang_server_tp_group ""' % (name, ', '.join(hosts))))
    missing = [one for one in hosts if one not in play_hosts]
    if missing:
        found.append(problem('sglang_server_tp_group', name, 'every member in the run: %s %s not (limit the run to whole groups, '
                             'e.g. -l %s)' % (', '.join(missing), 'is' if len(missing) == 1 else 'are', name)))
        return found
    unpublished = [one for one in hosts if one not in views]
    if unpublished:
        found.append(problem('sglang_server_tp_group', name, 'every member checked: %s published nothing (its own input '
                             'failed: see above)' % ', '.join(unpublished)))
        return found
    others = [one for one in hosts if _name(views.get(one)) != name]
    if others:
        found.append(problem('sglang_server_tp_group', name, 'the same group on every member of inventory group %s: %s set %s'
                             % (name, ', '.join(others), ', '.join(sorted(set(repr(_name(views.get(one))) for one in others))))))
        return found
    found.extend(_rank_problems(name, hosts, views))
    for key, variable in SAME:
        values = [views[one].get(key) for one in hosts]
        if any(value != values[0] for value in values):
            shown = '; '.join('%s: %s' % (one, views[one].get(key)) for one in hosts)
            found.append(problem(variable, view.get(key), 'the same value on every member of group %s (%s)' % (name, shown)))
    if not is_port(view.get('port')):
        found.append(problem('sglang_server_tp_group_port', view.get('port'), 'a port number (1-65535) for --dist-init-addr'))
    leader = ranked(name, views, groups)[0]
    address = views[leader].get('address')
    if not is_string(address) or not ADDRESS.match(address):
        found.append(problem('sglang_server_tp_group_address', address, 'the host name or IPv4 address of rank 0 (%s), which '
                             'the other members reach for --dist-init-addr' % leader))
    found.extend(_option_problems(view.get('args')))
    tp, pp = _sizes(view.get('args'))
    if (tp * pp) % len(hosts):
        found.append(problem('sglang_server_args', view.get('args'), 'a --tp x --pp (%d x %d) that the group\'s %d hosts '
                             'divide evenly (SGLang: "tp_size must be divisible by number of nodes")' % (tp, pp, len(hosts))))
    return found


def _rank_problems(name, hosts, views):
    ranks = [views[one].get('rank') for one in hosts]
    given = [rank for rank in ranks if rank is not None and rank != '']
    if not given:
        return []
    if len(given) != len(hosts):
        unset = [one for one, rank in zip(hosts, ranks) if rank is None or rank == '']
        return [problem('sglang_server_tp_group_rank', None, 'a rank on every member of group %s or on none (inventory order); '
                        'unset on %s' % (name, ', '.join(unset)))]
    bad = [(one, rank) for one, rank in zip(hosts, ranks) if not is_int(rank, 0)]
    if bad:
        return [problem('sglang_server_tp_group_rank', rank, 'a whole number from 0 (on %s)' % one) for one, rank in bad]
    if sorted(int(rank) for rank in ranks) != list(range(len(hosts))):
        shown = ', '.join('%s: %s' % (one, rank) for one, rank in zip(hosts, ranks))
        return [problem('sglang_server_tp_group_rank', [int(rank) for rank in ranks], 'ranks 0 to %d, each once, in group %s (%s)'
                        % (len(hosts) - 1, name, shown))]
    return []


def plan(host, views, groups):
    """{name, rank, nnodes, members (by rank), leader, dist_init_addr, args}; {} for a host in no group. Read
    after problems() found none."""
    view = views.get(host) or {}
    name = _name(view)
    if not name:
        return {}
    hosts = ranked(name, views, groups)
    leader = hosts[0]
    addr = '%s:%s' % ((views.get(leader) or {}).get('address'), view.get('port'))
    rank = hosts.index(host)
    return {'name': name, 'rank': rank, 'nnodes': len(hosts), 'members': hosts, 'leader': leader, 'dist_init_addr': addr,
            'args': ['--nnodes', str(len(hosts)), '--node-rank', str(rank), '--dist-init-addr', addr]}


def gpu_problems(host, views, groups, counts):
    """The members' GPU counts (gpu_info, {host: count}; a member not counted is left out) must be the same."""
    name = _name(views.get(host))
    if not name:
        return []
    known = [(one, counts[one]) for one in members(name, groups) if is_int(counts.get(one), 0)]
    if len(set(int(count) for _one, count in known)) <= 1:
        return []
    shown = ', '.join('%s: %s' % (one, count) for one, count in known)
    return [problem('sglang_server_tp_group', name, 'members with the same number of GPUs: SGLang puts the same share of '
                    '--tp x --pp on each (%s)' % shown)]


def revision_problems(host, views, groups, revisions):
    """The members' server revisions (each without its own rank, {host: {part: hash}}) must be one; a
    difference is named by its parts (arguments, model, config, environment, runtime_env, stack)."""
    name = _name(views.get(host))
    if not name:
        return []
    hosts = members(name, groups)
    values = [revisions.get(one) for one in hosts]
    behind = [one for one, value in zip(hosts, values) if not value]
    if behind:
        # A member that failed before it (its own failure is above): not a difference of settings.
        return ['group %s: %s did not get as far as the server (its failure is above); no member starts without it'
                % (name, ', '.join(behind))]
    if all(value == values[0] for value in values):
        return []
    if not all(isinstance(value, dict) for value in values):
        shown = ', '.join('%s: %s' % (one, value) for one, value in zip(hosts, values))
    else:
        parts = sorted(set(part for value in values for part in value
                           if any(other.get(part) != value.get(part) for other in values)))
        shown = '; '.join('%s: %s' % (part, ', '.join('%s %s' % (one, value.get(part, 'none'))
                                                      for one, value in zip(hosts, values)))
                          for part in parts)
    return ['group %s: its members would not run the same server, they differ in %s; give them the same settings '
            '(group_vars of %s)' % (name, shown, name)]


# A start of a group, as each member publishes it (the role's gate.yml, fact sglang_server_tp_group_outcome):
# {'stage': 'checking'} first on every member, then 'planned' with 'change' (whether it would restart on its
# own), 'starting' once its preflight passed, 'done' with 'ready', 'cause' and 'msg' after its gate.
STAGES = ('checking', 'planned', 'starting', 'done')


def _outcome(outcomes, host):
    outcome = outcomes.get(host)
    return outcome if isinstance(outcome, dict) else {}


def changing(host, views, groups, outcomes):
    """The members that would (re)start on their own: then every member restarts, since a rank that restarts
    alone leaves the others waiting on a peer that is gone."""
    name = _name(views.get(host))
    if not name:
        return []
    return [one for one in ranked(name, views, groups)
            if _outcome(outcomes, one).get('stage') == 'planned' and _outcome(outcomes, one).get('change')]


def start_problems(host, views, groups, outcomes):
    """Before a start: the members that did not get to theirs (their own checks failed): starting the others would
    leave them waiting for a peer that never comes."""
    name = _name(views.get(host))
    if not name:
        return []
    behind = ['rank %d (%s)' % (rank, one) for rank, one in enumerate(ranked(name, views, groups))
              if _outcome(outcomes, one).get('stage') != 'starting']
    if not behind:
        return []
    return ['group %s did not start: %s failed before its start (see above); no member was started'
            % (name, ', '.join(behind))]


def outcome_problems(host, views, groups, outcomes):
    """After a start: the members that did not serve, each with its rank, host and cause. outcomes: {host:
    {stage, ready, cause, msg}} of this start; a member without one that is done failed before it started."""
    name = _name(views.get(host))
    if not name:
        return []
    found = []
    for rank, one in enumerate(ranked(name, views, groups)):
        outcome = _outcome(outcomes, one)
        if not outcome or outcome.get('stage', 'done') != 'done':
            found.append('rank %d (%s) failed before its start' % (rank, one))
        elif not outcome.get('ready'):
            found.append('rank %d (%s) cause %s: %s' % (rank, one, outcome.get('cause') or 'unknown', outcome.get('msg') or ''))
    if not found:
        return []
    return ['group %s did not start: %s' % (name, '; '.join(found))]


def _batch_sizes(serial, units):
    """Ansible's serial over `units` batch members: an int, a percentage (rounded down, at least 1) or a list
    of those (the last one repeated)."""
    steps = list(serial) if isinstance(serial, (list, tuple)) else [serial]
    sizes, left, index = [], units, 0
    while left > 0:
        step = str(steps[min(index, len(steps) - 1)])
        size = max(int(units * int(step[:-1]) / 100.0), 1) if step.endswith('%') else max(int(step), 1)
        size = min(size, left)
        sizes.append(size)
        left -= size
        index += 1
    return sizes


def roll_order(hosts, views, groups, serial):
    """{'hosts': the roll's hosts, each group's members together by rank, 'serial': the batch sizes in hosts}
    for `serial` counted in batch members, a group being one member. A group is placed where its first
    member comes in `hosts`."""
    units, placed = [], set()
    for host in hosts:
        if host in placed:
            continue
        name = _name(views.get(host))
        unit = [one for one in ranked(name, views, groups) if one in hosts] if name else [host]
        units.append(unit)
        placed.update(unit)
    order, sizes, start = [], [], 0
    for size in _batch_sizes(serial, len(units)):
        batch = units[start:start + size]
        start += size
        sizes.append(sum(len(unit) for unit in batch))
        for unit in batch:
            order.extend(unit)
    return {'hosts': order, 'serial': sizes or [1]}
