# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every problem of a role's input: the role's checks (module_utils/<area>/validate.py) over the
variables they read, rendered here on the controller, so the YAML keeps only the host probes."""

from __future__ import annotations

DOCUMENTATION = r"""
name: input_problems
author:
  - inferops.gpu maintainers (@inferops)
version_added: 0.1.0
short_description: Check a role's input
description:
  - Renders the variables a role's checks read (C(plugins/module_utils/<area>/validate.py)) and returns every problem
    of that input, one message each, in one form that names the variable, its bad value (secrets hidden, credentials
    in URLs masked) and what is allowed. An empty list means the input is fine.
  - The role's argument spec runs first and checks the types; these checks see what it lets through.
  - A variable whose template fails is one problem, named with the error.
options:
  _terms:
    description: The role's name, one of C(cuda_toolkit), C(ml_env), C(runtime_env), C(gpu_health), C(sglang_server),
      C(rolling), C(sglang_gateway).
    required: true
    type: list
    elements: str
  probes:
    description: What the role's host probes found (registered results), by the names its checks read.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Check the gateway's input
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join('; ') }}"
    quiet: true
  vars:
    problems: "{{ query('inferops.gpu.input_problems', 'sglang_gateway') }}"
"""

RETURN = r"""
_raw:
  description: The problems, one message each; empty when the input is fine.
  type: list
  elements: str
"""

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

from ansible_collections.inferops.gpu.plugins.module_utils.cuda_toolkit import validate as cuda_toolkit_input
from ansible_collections.inferops.gpu.plugins.module_utils.gpu import validate as gpu_health_input
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env import validate as ml_env_input
from ansible_collections.inferops.gpu.plugins.module_utils.fleet import rolling_validate as rolling_input
from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import validate as runtime_env_input
from ansible_collections.inferops.gpu.plugins.module_utils.sglang import gateway_validate as sglang_gateway_input
from ansible_collections.inferops.gpu.plugins.module_utils.sglang import server_validate as sglang_server_input
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import MISSING, run_checks

ROLES = {
    'cuda_toolkit': cuda_toolkit_input,
    'gpu_health': gpu_health_input,
    'ml_env': ml_env_input,
    'rolling': rolling_input,
    'runtime_env': runtime_env_input,
    'sglang_gateway': sglang_gateway_input,
    'sglang_server': sglang_server_input,
}


def render(names, variables, template):
    """({name: rendered value or MISSING}, [a message per template that failed])."""
    values, failed = {}, []
    for name in names:
        if name not in variables:
            values[name] = MISSING
            continue
        try:
            values[name] = template(variables[name])
        except AnsibleError as error:
            values[name] = MISSING
            failed.append('%s could not be rendered: %s' % (name, str(error).splitlines()[0] if str(error) else error))
    return values, failed


def problems(role, variables, template, probes=None):
    """The lookup's work without the plugin: role's name, the host's variables, a template function."""
    if role not in ROLES:
        raise AnsibleError('input_problems: unknown role %r; known: %s' % (role, ', '.join(sorted(ROLES))))
    checks = ROLES[role]
    values, failed = render(checks.NAMES, variables, template)
    return failed + run_checks(checks.CHECKS, values, probes or {})


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        probes = kwargs.get('probes') or {}
        found = []
        for role in terms:
            found.extend(problems(role, variables or {}, self._templar.template, probes))
        return found
