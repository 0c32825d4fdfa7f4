# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ml_env validation's note that a profile has no lock (roles/ml_env/tasks/validate.yml, "Say that the
stack is resolved on each node without a lock"), said at most once per host and run, and only when it
matters: site.yml's check play runs validate.yml, and the role's own run imports it again (and a rollback,
and the gateway's include of the role), so `make demo` printed `ml_env_profiles["ci"] has no lock` twice
per host (issue 41). The demo's profile says it has no lock on purpose (`lock: false`).

The tasks' templates are rendered as Ansible renders them, in the order of the file, the facts of each
set_fact carried to the next task as a run carries them from play to play; the probes and the lock as on
a host without a release.
"""

from __future__ import annotations

import os
import sys

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'unit', 'plugins', 'lookup'))
import input_cases  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.inferops.gpu.plugins.module_utils.ml_env import validate as ml_env_input  # noqa: E402
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import run_checks  # noqa: E402

VALIDATE = os.path.join(ROOT, 'roles', 'ml_env', 'tasks', 'validate.yml')
DEMO = os.path.join(ROOT, 'inventories', 'local', 'group_vars', 'blackwell.yml')
NOTE = 'Say that the stack is resolved on each node without a lock'
# The tasks from the profile's name to the published facts, the note among them.
TASKS = ('Name the profile in later messages', 'Resolve the profile and the variables into one stack', NOTE,
         'Publish the lock the stack wants and the one the current release was built from')
SIX = {'packages': {'six': '1.17.0'}}


def tasks():
    with open(VALIDATE) as handle:
        return dict((task['name'], task) for task in yaml.safe_load(handle))


def true(value):
    return value is True or str(value) == 'True'


class Host(object):
    """One host through a run: its variables (a case's, over the role's defaults and vars), and the facts
    validate.yml's tasks leave for the next time it runs in the same run."""

    def __init__(self, **case_vars):
        self.variables = input_cases.host_variables('ml_env', dict(input_cases.REQUIRED, **case_vars), input_cases.facts())
        self.notes = []

    def validate(self, **include_vars):
        """One run of validate.yml on this host (include_vars: the variables of an include, as the gateway's);
        the note's text when it was said, else None."""
        found = tasks()
        said = None
        for name in TASKS:
            task = found[name]
            variables = dict(self.variables, __ml_env_lock='', __ml_env_probe={'files': {'pins': {}}},
                             **input_cases.trusted(include_vars))
            templar = Templar(loader=DataLoader(), variables=variables)
            if 'ansible.builtin.set_fact' in task:
                facts = task['ansible.builtin.set_fact']
                self.variables.update((key, templar.template(input_cases.trusted(value))) for key, value in facts.items())
                continue
            conditions = task.get('when', [])
            conditions = conditions if isinstance(conditions, list) else [conditions]
            if all(true(templar.template(input_cases.trusted('{{ %s }}' % condition))) for condition in conditions):
                said = templar.template(input_cases.trusted(task['ansible.builtin.debug']['msg']))
        self.notes.append(said)
        return said


def told(notes):
    return [note for note in notes if note]


def test_a_fleet_profile_without_a_lock_is_named_once_per_host_and_run():
    # site.yml: the check play (tasks_from: validate), the node's run of the role (main.yml imports
    # validate.yml), then a rollback of the roll (the role again, ml_env_rollback).
    host = Host()
    first = host.validate()
    assert first.startswith('WARNING: ml_env_profiles["sglang-0.5.9-cu130"] has no lock: each node resolves'), first
    assert 'make lock PROFILE=sglang-0.5.9-cu130' in first
    host.validate()
    host.validate(ml_env_rollback=True)
    assert told(host.notes) == [first]
    # Another host of the same run is told too, and the next run tells the host again.
    assert Host().validate() == first


def test_each_profile_a_host_runs_is_named_once():
    # The gateway's include of the role on a co-hosted node builds another profile.
    gateway = {'ml_env_profile': 'gw', 'ml_env_profiles': {'gw': SIX}}
    host = Host(ml_env_profile='custom', ml_env_profiles={'custom': SIX})
    host.validate()
    host.validate(**gateway)
    host.validate()
    host.validate(**gateway)
    assert [note.split(' has no lock')[0] for note in told(host.notes)] == [
        'WARNING: ml_env_profiles["custom"]', 'WARNING: ml_env_profiles["gw"]']


@pytest.mark.parametrize('case_vars', [
    # A lock (its checks are check_lock's), or none on purpose.
    {'ml_env_profile': 'custom', 'ml_env_profiles': {'custom': dict(SIX, lock='/srv/locks/six.txt')}},
    {'ml_env_profile': 'custom', 'ml_env_profiles': {'custom': dict(SIX, lock=False)}},
    # Nothing to resolve: the host's torch.
    {'ml_env_profile': 'host-torch'},
    # make lock (playbooks/lock.yml) makes the lock the note asks for.
    {'__ml_env_making_lock': True},
], ids=['a-lock', 'lock-false', 'no-pins', 'making-the-lock'])
def test_no_note_where_it_does_not_matter(case_vars):
    host = Host(**case_vars)
    host.validate()
    host.validate()
    assert told(host.notes) == []


def test_pins_on_a_profile_of_no_pins_are_resolved_on_the_node_too():
    host = Host(ml_env_profile='host-torch', ml_env_extra_packages={'sglang': '0.5.9', 'idna': '3.10'})
    assert host.validate().startswith('WARNING: ml_env_profiles["host-torch"] has no lock')


def demo_vars():
    with open(DEMO) as handle:
        return yaml.safe_load(handle)


def test_the_demo_prints_no_note_and_its_profile_passes_the_checks():
    case_vars = demo_vars()
    assert case_vars['ml_env_profiles']['ci']['lock'] is False
    host = Host(**case_vars)
    host.validate()
    host.validate()
    assert told(host.notes) == []
    evaluation = input_cases.Evaluation({'role': 'ml_env', 'vars': dict(input_cases.REQUIRED, **case_vars)})
    assert not evaluation.spec_errors and not evaluation.render_failures
    assert run_checks(ml_env_input.CHECKS, evaluation.values, {}) == []


def test_the_demos_profile_without_lock_false_would_be_named():
    # What the demo printed before: the same profile, the key taken away, is named (once).
    case_vars = demo_vars()
    profile = dict(case_vars['ml_env_profiles']['ci'])
    del profile['lock']
    host = Host(**dict(case_vars, ml_env_profiles={'ci': profile}))
    host.validate()
    host.validate()
    assert [note[:len('WARNING: ml_env_profiles["ci"] has no lock')] for note in told(host.notes)] == [
        'WARNING: ml_env_profiles["ci"] has no lock']
