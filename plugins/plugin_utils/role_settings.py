# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' settings on the controller, resolved as the roles resolve them: the host's variables
(inventory, -e) over the roles' defaults/main.yml, the roles' vars/main.yml over both, each templated
on demand with all of them. The one place a playbook or another role learns a role's default without
typing it again: the action plugin node_info (verify.yml) and the lookup role_setting use it.
"""

from __future__ import annotations

import inspect
import os

from ansible.parsing.dataloader import DataLoader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The roles whose variables are read, in the order the roles run (a later role's name wins a clash).
DEFAULTS = ('cuda_toolkit', 'ml_env', 'runtime_env', 'gpu_health', 'sglang_server', 'sglang_gateway', 'rolling')
VARS = ('cuda_toolkit', 'ml_env', 'runtime_env', 'gpu_health', 'sglang_server')

# ansible-core 2.19 and later template only trusted strings, and trust a role's files as Ansible loads them; 2.17 and
# 2.18 have no such argument (and template every string).
TRUSTED = 'trusted_as_template' in inspect.signature(DataLoader.load_from_file).parameters


def role_files(root=ROOT):
    """[(kind, path)] of the roles' defaults and vars files the settings come from."""
    return ([('defaults', os.path.join(root, 'roles', role, 'defaults', 'main.yml')) for role in DEFAULTS]
            + [('vars', os.path.join(root, 'roles', role, 'vars', 'main.yml')) for role in VARS])


def load_file(loader, path):
    """A role's file as Ansible loads it, its templates trusted. Not copied (unsafe=True: callers never change it): the
    lookup runs in every template that reaches a role default built on it, and the deep copy DataLoader makes of its
    cache on each load was a quarter of a converge's controller CPU."""
    if TRUSTED:
        return loader.load_from_file(path, unsafe=True, trusted_as_template=True)
    return loader.load_from_file(path, unsafe=True)


def load_role_variables(load, root=ROOT):
    """(defaults, vars), each merged over the roles; load(path) -> the file's data, as Ansible loads a role's
    (templates trusted). A file that is not there gives nothing: the settings it held are reported unresolved."""
    found = {'defaults': {}, 'vars': {}}
    for kind, path in role_files(root):
        if not os.path.isfile(path):
            continue
        data = load(path)
        if isinstance(data, dict):
            found[kind].update(data)
    return found['defaults'], found['vars']


class Unresolved(Exception):
    pass


class Settings:
    """The roles' variables for one host: its variables over the roles' defaults, the roles' vars over both (as
    Ansible ranks role vars above the inventory), each templated on demand with all of them."""

    def __init__(self, templar, task_vars, defaults, role_vars):
        self.variables = dict(defaults)
        self.variables.update(task_vars)
        self.variables.update(role_vars)
        self.templar = templar.copy_with_new_env(available_variables=self.variables)
        self.problems = []

    def get(self, name):
        if name not in self.variables:
            self.problems.append('%s is not defined' % name)
            raise Unresolved(name)
        try:
            return self.templar.template(self.variables[name])
        except Exception as exc:  # pylint: disable=broad-except
            # Whatever Jinja or the variables raise: this part is not read, the rest is.
            self.problems.append('%s: %s' % (name, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
            raise Unresolved(name)
