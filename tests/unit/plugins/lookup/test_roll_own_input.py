# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roll's own input (rolling_serial) checked in playbooks/converged.yml, whether or not a node rolls.

Issue 41: site.yml over a fleet where every node is converged checked nothing of the roll (its check
play runs on the nodes that go through the roles: none), so `-e rolling_serial=0` or `abc` passed with
rc 0 while rolling.yml refused them. converged.yml, the first play of both, now runs the rolling role's
checks (rolling_validate.py, through the lookup input_problems) once, outside the role, and keeps
rolling_serial's messages. Here: the task's own expression from converged.yml, rendered through
ansible-core's Templar and the real lookup with what a play outside the role sees (no role defaults,
no role vars); tests/unit/roles/test_roll_input_play.py runs the playbooks themselves.
"""

from __future__ import annotations

import os

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from trust import trusted  # tests/unit/trust.py

from ansible_collections.inferops.gpu.plugins.module_utils.fleet import rolling_validate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
TASK = "Check the roll's own input"


def converged_tasks():
    with open(os.path.join(ROOT, 'playbooks', 'converged.yml')) as handle:
        plays = yaml.safe_load(handle)
    assert len(plays) == 1
    return plays[0]['tasks']


def the_task():
    return next(task for task in converged_tasks() if task['name'] == TASK)


def roll_problems(**host_vars):
    """The task's __converged_roll_problems as the play renders it on node-1 (a play's variables only)."""
    expression = the_task()['vars']['__converged_roll_problems']
    variables = dict(trusted(host_vars), inventory_hostname='node-1', groups={'all': ['node-1', 'node-2'],
                     'ungrouped': ['node-1', 'node-2']}, ansible_play_hosts=['node-1', 'node-2'])
    return Templar(loader=DataLoader(), variables=variables).template(trusted(expression))


def test_the_check_runs_once_before_anything_reads_a_node():
    tasks = converged_tasks()
    names = [task['name'] for task in tasks]
    modules = [next(key for key in task if '.' in key) for task in tasks]
    index = names.index(TASK)
    # Before the fast path's module, the first task that reaches a node: every earlier one is an assert on the controller.
    assert index < modules.index('inferops.gpu.converged')
    assert set(modules[:index + 1]) == {'ansible.builtin.assert'}
    task = tasks[index]
    assert task['run_once'] is True
    assert task['ansible.builtin.assert']['that'] == '__converged_roll_problems | length == 0'
    assert task['ansible.builtin.assert']['fail_msg'] == "{{ __converged_roll_problems | join('; ') }}"
    # The rolling role's own checks, through the lookup: one message style with rolling.yml's check play.
    assert "query('inferops.gpu.input_problems', 'rolling')" in task['vars']['__converged_roll_problems']


@pytest.mark.parametrize('serial, shown', [
    ('0', '"0"'), (0, '0'), ('abc', '"abc"'), ('-1', '"-1"'), ('0%', '"0%"'), ('150%', '"150%"'), ([], '[]'),
    ([1, '0%'], '[1, "0%"]'), (True, 'true'),
])
def test_a_bad_batch_size_is_refused_in_the_one_message_style(serial, shown):
    assert roll_problems(rolling_serial=serial) == [
        'rolling_serial = %s is not allowed: %s' % (shown, rolling_validate.SERIAL_ALLOWED)]


@pytest.mark.parametrize('serial', [1, '2', '25%', '100%', [1, '50%', '100%']])
def test_a_good_batch_size_passes(serial):
    assert roll_problems(rolling_serial=serial) == []


def test_not_set_passes():
    assert roll_problems() == []


def test_the_roles_own_variables_are_not_judged_here():
    # Outside the role its defaults and vars are not set (their checks would name them "(not set)"), a
    # template that reads another role's default fails to render, and a bad value of the role's is a
    # node's input, which its record's digest holds: the check play judges it on every node that rolls.
    found = roll_problems(rolling_serial=2, rolling_drain_timeout=0, rolling_gateway_host='gw-nowhere',
                          rolling_snapshot_files="{{ [sglang_server_config_dir ~ '/extra.yaml'] }}")
    assert found == []


def test_a_batch_size_that_does_not_render_is_named():
    found = roll_problems(rolling_serial='{{ undefined_batch }}')
    assert len(found) == 1 and found[0].startswith('rolling_serial could not be rendered'), found
