# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Multi-node TP groups: the checks before any change, a member's plan, the roll's order and a start's outcome."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.fleet import tp_group

ARGS = ['--tp', '16', '--mem-fraction-static', '0.85']


def view(group='kimi', rank=None, address='', port=50000, args=None, model='/srv/models/kimi', state='started'):
    return {'group': group, 'rank': rank, 'address': address, 'port': port, 'args': list(ARGS if args is None else args),
            'model_path': model, 'state': state}


def fleet(**changes):
    """Two group members (node-a, node-b, inventory order b then a), a lone host; changes: {host: view}."""
    views = {'node-b': view(address='10.0.0.2'), 'node-a': view(address='10.0.0.1'), 'solo': view(group='')}
    views.update(changes)
    groups = {'all': ['node-a', 'node-b', 'solo'], 'kimi': ['node-b', 'node-a'], 'ungrouped': ['solo']}
    return views, groups


PLAY = ['node-a', 'node-b', 'solo']


def test_a_whole_group_has_no_problem_and_ranks_follow_the_inventory_group():
    views, groups = fleet()
    assert tp_group.problems('node-a', views, groups, PLAY) == []
    plan = tp_group.plan('node-a', views, groups)
    assert plan == {'name': 'kimi', 'rank': 1, 'nnodes': 2, 'members': ['node-b', 'node-a'], 'leader': 'node-b',
                    'dist_init_addr': '10.0.0.2:50000',
                    'args': ['--nnodes', '2', '--node-rank', '1', '--dist-init-addr', '10.0.0.2:50000']}
    assert tp_group.plan('node-b', views, groups)['rank'] == 0


def test_a_lone_host_has_no_group():
    views, groups = fleet()
    assert tp_group.problems('solo', views, groups, PLAY) == []
    assert tp_group.plan('solo', views, groups) == {}


def test_explicit_ranks_win_over_the_inventory_order():
    views, groups = fleet(**{'node-a': view(rank=0, address='10.0.0.1'), 'node-b': view(rank='1', address='10.0.0.2')})
    assert tp_group.problems('node-b', views, groups, PLAY) == []
    assert tp_group.plan('node-b', views, groups)['members'] == ['node-a', 'node-b']
    assert tp_group.plan('node-b', views, groups)['dist_init_addr'] == '10.0.0.1:50000'


@pytest.mark.parametrize('ranks, expected', [
    ((0, None), 'a rank on every member of group kimi or on none (inventory order); unset on node-a'),
    ((0, 0), 'ranks 0 to 1, each once, in group kimi (node-b: 0, node-a: 0)'),
    ((1, 2), 'ranks 0 to 1, each once'),
    ((0, -1), 'a whole number from 0 (on node-a)'),
])
def test_ranks_must_be_unique_and_contiguous(ranks, expected):
    views, groups = fleet(**{'node-b': view(rank=ranks[0], address='b'), 'node-a': view(rank=ranks[1], address='a')})
    found = tp_group.problems('node-a', views, groups, PLAY)
    assert len(found) == 1 and found[0].startswith('sglang_server_tp_group_rank = ') and expected in found[0]


def test_every_member_must_be_in_the_run():
    views, groups = fleet()
    found = tp_group.problems('node-b', views, groups, ['node-b', 'solo'])
    assert found == ['sglang_server_tp_group = "kimi" is not allowed: every member in the run: node-a is not (limit the run '
                     'to whole groups, e.g. -l kimi)']


@pytest.mark.parametrize('key, value, variable', [
    ('port', 50001, 'sglang_server_tp_group_port'),
    ('model_path', '/srv/models/other', 'sglang_server_model_path'),
    ('state', 'stopped', 'sglang_server_state'),
    ('args', ['--tp', '16', '--mem-fraction-static', '0.8'], 'sglang_server_args + sglang_server_extra_args'),
])
def test_members_must_agree(key, value, variable):
    changed = view(address='10.0.0.1')
    changed[key] = value
    views, groups = fleet(**{'node-a': changed})
    found = tp_group.problems('node-b', views, groups, PLAY)
    assert len(found) == 1 and found[0].startswith(variable + ' = ')
    assert 'the same value on every member of group kimi (node-b: ' in found[0]


def test_a_member_that_names_another_group_or_none():
    views, groups = fleet(**{'node-a': view(group='')})
    found = tp_group.problems('node-b', views, groups, PLAY)
    assert found == ['sglang_server_tp_group = "kimi" is not allowed: the same group on every member of inventory group '
                     "kimi: node-a set ''"]


def test_a_member_whose_own_input_failed_is_named():
    views, groups = fleet()
    del views['node-a']
    found = tp_group.problems('node-b', views, groups, PLAY)
    assert found == ['sglang_server_tp_group = "kimi" is not allowed: every member checked: node-a published nothing '
                     '(its own input failed: see above)']


@pytest.mark.parametrize('name, expected', [
    ('nope', 'an inventory group that node-a is in (its members are none: no such group)'),
    ('ungrouped', 'an inventory group that node-a is in (its members are solo)'),
    ('bad-name', 'the name of an inventory group'),
])
def test_the_group_must_be_an_inventory_group_of_the_host(name, expected):
    views, groups = fleet(**{'node-a': view(group=name)})
    found = tp_group.problems('node-a', views, groups, PLAY)
    assert len(found) == 1 and expected in found[0]


def test_a_group_of_one_is_refused():
    views, groups = fleet(solo=view(group='ungrouped'))
    found = tp_group.problems('solo', views, groups, PLAY)
    assert 'a group of at least 2 hosts (ungrouped has only solo)' in found[0]


def test_the_role_owns_the_multi_node_options():
    args = ARGS + ['--nnodes=2', '--dist-init', 'x:1']
    views, groups = fleet(**{'node-a': view(args=args, address='10.0.0.1'), 'node-b': view(args=args, address='10.0.0.2')})
    found = tp_group.problems('node-a', views, groups, PLAY)
    assert [one.split(' is not allowed')[0] for one in found] == ['sglang_server_args = "--nnodes=2"',
                                                                  'sglang_server_args = "--dist-init"']
    assert 'the role sets --nnodes, --node-rank and --dist-init-addr from sglang_server_tp_group' in found[0]


def test_tp_times_pp_must_divide_over_the_nodes():
    args = ['--tp', '3']
    views, groups = fleet(**{'node-a': view(args=args, address='10.0.0.1'), 'node-b': view(args=args, address='10.0.0.2')})
    found = tp_group.problems('node-a', views, groups, PLAY)
    assert len(found) == 1 and "(3 x 1) that the group's 2 hosts divide evenly" in found[0]


def test_rank_0_needs_an_address_the_others_can_reach():
    views, groups = fleet(**{'node-b': view(address='fe80::1')})
    found = tp_group.problems('node-a', views, groups, PLAY)
    assert len(found) == 1 and found[0].startswith('sglang_server_tp_group_address = "fe80::1" is not allowed: the host name '
                                                   'or IPv4 address of rank 0 (node-b)')


def test_gpu_counts_must_match():
    views, groups = fleet()
    assert tp_group.gpu_problems('node-a', views, groups, {'node-a': 8, 'node-b': 8}) == []
    assert tp_group.gpu_problems('node-a', views, groups, {'node-a': 8}) == []
    found = tp_group.gpu_problems('node-a', views, groups, {'node-a': 8, 'node-b': '4'})
    assert len(found) == 1 and 'members with the same number of GPUs' in found[0] and '(node-b: 4, node-a: 8)' in found[0]
    assert tp_group.gpu_problems('solo', views, groups, {'solo': 1}) == []


def test_revisions_must_be_one_and_a_difference_is_named_by_its_parts():
    views, groups = fleet()
    same = {'arguments': 'a1', 'stack': 's1'}
    assert tp_group.revision_problems('node-a', views, groups, {'node-a': same, 'node-b': dict(same)}) == []
    # a member that failed before (no revision this run) is named as such, not as a difference of settings
    assert tp_group.revision_problems('node-a', views, groups, {'node-a': same}) == [
        'group kimi: node-b did not get as far as the server (its failure is above); no member starts without it']
    found = tp_group.revision_problems('node-a', views, groups, {'node-a': same, 'node-b': {'arguments': 'a1', 'stack': 's2'}})
    assert found == ['group kimi: its members would not run the same server, they differ in stack: node-b s2, node-a s1; '
                     'give them the same settings (group_vars of kimi)']


def test_the_outcome_names_each_member_that_did_not_serve_with_its_cause():
    views, groups = fleet()
    outcomes = {'node-b': {'ready': False, 'cause': 'stall', 'msg': 'no output for 120 s'},
                'node-a': {'ready': False, 'cause': 'rank_crash', 'msg': 'Scheduler hit an exception'}}
    assert tp_group.outcome_problems('node-a', views, groups, outcomes) == [
        'group kimi did not start: rank 0 (node-b) cause stall: no output for 120 s; rank 1 (node-a) cause rank_crash: '
        'Scheduler hit an exception']
    outcomes = {'node-b': {'ready': True}}
    assert tp_group.outcome_problems('node-b', views, groups, outcomes) == [
        'group kimi did not start: rank 1 (node-a) failed before its start']
    assert tp_group.outcome_problems('node-b', views, groups, {'node-a': {'ready': True}, 'node-b': {'ready': True}}) == []


@pytest.mark.parametrize('serial, order, sizes', [
    (1, ['solo', 'node-b', 'node-a', 'x'], [1, 2, 1]),
    (2, ['solo', 'node-b', 'node-a', 'x'], [3, 1]),
    ('50%', ['solo', 'node-b', 'node-a', 'x'], [1, 2, 1]),
    ('100%', ['solo', 'node-b', 'node-a', 'x'], [4]),
    ([1, '100%'], ['solo', 'node-b', 'node-a', 'x'], [1, 3]),
])
def test_a_roll_counts_a_group_as_one_batch_member(serial, order, sizes):
    views, groups = fleet(x=view(group=''))
    groups['all'].append('x')
    result = tp_group.roll_order(['solo', 'node-a', 'x', 'node-b'], views, groups, serial)
    assert result == {'hosts': order, 'serial': sizes}


def test_a_roll_of_no_host():
    views, groups = fleet()
    assert tp_group.roll_order([], views, groups, 1) == {'hosts': [], 'serial': [1]}


def test_one_member_that_would_restart_restarts_them_all():
    views, groups = fleet()
    planned = {'node-b': {'stage': 'planned', 'change': False}, 'node-a': {'stage': 'planned', 'change': True}}
    assert tp_group.changing('node-b', views, groups, planned) == ['node-a']
    # an earlier start's records (another stage) do not count
    assert tp_group.changing('node-b', views, groups, {'node-a': {'stage': 'done', 'change': True}}) == []
    assert tp_group.changing('solo', views, groups, planned) == []


def test_no_member_starts_unless_every_member_got_to_its_start():
    views, groups = fleet()
    assert tp_group.start_problems('node-a', views, groups, {'node-a': {'stage': 'starting'},
                                                             'node-b': {'stage': 'starting'}}) == []
    # node-b's preflight failed: it never said it was starting (its record is the plan's)
    assert tp_group.start_problems('node-a', views, groups, {'node-a': {'stage': 'starting'},
                                                             'node-b': {'stage': 'planned'}}) == [
        'group kimi did not start: rank 0 (node-b) failed before its start (see above); no member was started']


def test_an_outcome_of_a_member_still_planned_is_a_failure_before_its_start():
    views, groups = fleet()
    outcomes = {'node-b': {'stage': 'done', 'ready': True}, 'node-a': {'stage': 'planned'}}
    assert tp_group.outcome_problems('node-b', views, groups, outcomes) == [
        'group kimi did not start: rank 1 (node-a) failed before its start']
