# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bad-input tables (tests/bad_inputs/*.yml) against the Python layer, as a play would run it.

A case's variables are laid over every role's defaults and role vars and the facts of a real Debian host (tests/unit/fixtures/facts/, the
minimal subset the check play gathers). Then, as `tasks_from: validate` does: the role's argument
spec (its `validate` entry point, through ansible-core's own validator and templating), and when
that passes, the role's checks through the lookup's own code with ansible-core's Templar.

A case whose verdict needs a host probe (a path's stat, an interpreter's answer) carries what the
probe returned on the bare test host under `probes:` (the names the role's validate.yml passes to
the lookup) and `on_host: true`: the bad_input scenario runs it on that real host too, which
proves the recording.
"""

from __future__ import annotations

import copy
import json
import os
import sys

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from trust import trusted  # tests/unit/trust.py (the roles tests reach it through this module too)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
# The collection's filters (inferops.gpu.*) resolve in templates through ansible-core's collection
# loader, which tests/unit/conftest.py installs.
from ansible_collections.inferops.gpu.plugins.lookup import input_problems  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, 'tests', 'bad_inputs'))
from bad_input_cases import REQUIRED, TABLES, load_cases  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import

FACTS_DIR = os.path.join(ROOT, 'tests', 'unit', 'fixtures', 'facts')
# The order playbooks/validate.yml imports them in.
ROLES = ('cuda_toolkit', 'ml_env', 'runtime_env', 'gpu_health', 'sglang_server', 'rolling', 'sglang_gateway')
HOST = 'inferops-badin-1'
_LOADER = DataLoader()
_FILES = {}


def load_yaml(path):
    if path not in _FILES:
        with open(path) as handle:
            _FILES[path] = trusted(yaml.safe_load(handle) or {})
    return copy.deepcopy(_FILES[path])


def facts(name='debian_bookworm_min'):
    with open(os.path.join(FACTS_DIR, name + '.json')) as handle:
        return json.load(handle)


def host_variables(role, case_vars, host_facts, groups=None):
    """What a task of `role` sees on the host, by Ansible's precedence (low to high)."""
    variables = {}
    for one in ROLES:
        variables.update(load_yaml(os.path.join(ROOT, 'roles', one, 'defaults', 'main.yml')))
    variables.update(('ansible_' + key, value) for key, value in host_facts.items())
    variables.update(trusted(copy.deepcopy(case_vars)))
    for one in ROLES:
        path = os.path.join(ROOT, 'roles', one, 'vars', 'main.yml')
        if os.path.isfile(path):
            variables.update(load_yaml(path))
    variables.update(
        ansible_facts=host_facts, inventory_hostname=HOST, inventory_hostname_short=HOST,
        groups=groups or {'all': [HOST], 'ungrouped': [HOST]}, group_names=[], hostvars={}, ansible_play_hosts=[HOST],
        ansible_play_hosts_all=[HOST], playbook_dir=os.path.join(ROOT, 'playbooks'),
        role_path=os.path.join(ROOT, 'roles', role), role_name='inferops.gpu.' + role, ansible_check_mode=False)
    return variables


def spec_options(role):
    with open(os.path.join(ROOT, 'roles', role, 'meta', 'argument_specs.yml')) as handle:
        return yaml.safe_load(handle)['argument_specs']['validate'].get('options', {})


class Evaluation(object):
    """One case through the argument spec and, when it passes, the rendered input of the checks."""

    def __init__(self, case, host_facts=None):
        self.case = case
        role = case['role']
        groups = {'all': [HOST], 'sglang_gateway': [HOST]} if role == 'sglang_gateway' else None
        variables = host_variables(role, case['vars'], host_facts or facts(), groups)
        templar = Templar(loader=_LOADER, variables=variables)
        options = spec_options(role)
        provided = templar.template(dict((name, variables[name]) for name in options if name in variables))
        result = ArgumentSpecValidator(options).validate(provided, validate_role_argument_spec=True)
        self.spec_errors = list(result.error_messages)
        self.values, self.render_failures = input_problems.render(input_problems.ROLES[role].NAMES, variables,
                                                                  templar.template)

    def messages(self, checks=None):
        """The failure text the play shows ('' when the input passes); checks: the role's CHECKS or a subset."""
        if self.spec_errors:
            return 'Validation of arguments failed:\n' + '\n'.join(self.spec_errors)
        checks = input_problems.ROLES[self.case['role']].CHECKS if checks is None else checks
        found = self.render_failures + input_problems.run_checks(checks, self.values, self.case.get('probes') or {})
        return '; '.join(found)


def verdict(case, text):
    """None when the case holds with this failure text, else what is wrong."""
    if case.get('clean'):
        return None if not text else 'a clean case failed: %s' % text
    if not text:
        return 'the checks accepted %s' % json.dumps(case['vars'], default=str)
    missing = [fragment for fragment in case['expect'] if fragment not in text]
    return None if not missing else '%s not in the failure: %s' % (missing, text)
