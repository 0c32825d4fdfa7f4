# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every bool variable of every role is read through `| bool`.

`-e var=false` hands a role the string "false": Jinja calls it true, and ansible-core 2.19+
refuses it in a conditional. A role's argument spec checks the value but does not convert it.
"""

from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
               for p in glob.glob(os.path.join(ROOT, 'roles', '*', 'meta', 'argument_specs.yml')))
READ_FROM = ('tasks', 'handlers', 'templates', 'vars')


def bool_options(role):
    with open(os.path.join(ROOT, 'roles', role, 'meta', 'argument_specs.yml')) as handle:
        specs = yaml.safe_load(handle)['argument_specs']
    return sorted(set(name for entry in specs.values() for name, spec in entry.get('options', {}).items()
                      if spec.get('type') == 'bool'))


CONDITIONALS = ('when', 'that', 'changed_when', 'failed_when', 'until')
JINJA = re.compile(r'{{(.*?)}}|{%(.*?)%}', re.S)
LITERAL = re.compile(r"'[^']*'|\"[^\"]*\"")


def expressions(node, key=None):
    """Every Jinja expression in a loaded YAML document: conditionals whole, other strings' {{ }}.

    Yields (expression, is_conditional)."""
    if isinstance(node, dict):
        for child_key, child in node.items():
            yield from expressions(child, child_key)
    elif isinstance(node, list):
        for child in node:
            yield from expressions(child, key)
    elif isinstance(node, str):
        if key in CONDITIONALS:
            yield node, True
        for match in JINJA.finditer(node):
            yield match.group(1) or match.group(2), False


def role_expressions(role):
    for folder in READ_FROM:
        for path in sorted(glob.glob(os.path.join(ROOT, 'roles', role, folder, '**', '*'), recursive=True)):
            if not os.path.isfile(path):
                continue
            with open(path) as handle:
                text = handle.read()
            if path.endswith(('.yml', '.yaml')):
                found = list(expressions(yaml.safe_load(text)))
            else:
                found = [(m.group(1) or m.group(2), False) for m in JINJA.finditer(text)]
            for expression, conditional in found:
                yield os.path.relpath(path, ROOT), expression, conditional


def unconverted_uses(role, name):
    """`file: expression` of every use of `name` as a truth value without `| bool`.

    A truth value: in a conditional, or in an expression that tests (if, and, or, not). Passing
    the value on (a module's bool option converts "false" itself), printing it or checking its
    type is not one."""
    use = re.compile(r'(?<![\w.])%s\b(?!\s*(\|\s*(bool|string|to_json)\b|is\s+(not\s+)?(boolean|defined)\b))'
                     % re.escape(name))
    tests = re.compile(r'\b(if|and|or|not)\b')
    found = []
    for path, expression, conditional in role_expressions(role):
        code = LITERAL.sub("''", expression)
        if (conditional or tests.search(code)) and use.search(code):
            found.append('%s: %s' % (path, ' '.join(expression.split())))
    return found


def test_roles_are_found():
    assert {'cuda_toolkit', 'ml_env', 'runtime_env'} <= set(ROLES)


@pytest.mark.parametrize('role', ROLES)
def test_every_bool_variable_is_read_through_the_bool_filter(role):
    problems = [use for name in bool_options(role) for use in unconverted_uses(role, name)]
    assert not problems, 'read these through | bool:\n' + '\n'.join(problems)
