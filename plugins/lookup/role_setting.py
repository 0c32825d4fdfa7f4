# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's setting where another role or a playbook needs it: the host's value, else the role's
default, never typed a second time."""

from __future__ import annotations

DOCUMENTATION = r"""
name: role_setting
author:
  - inferops.gpu maintainers (@inferops)
version_added: 0.1.0
short_description: A role's variable as the role resolves it, from outside the role
description:
  - Returns each named variable of the collection's roles as the role itself would see it on this host - the host's
    value (inventory, C(-e), facts) when set, else the role's default from its C(defaults/main.yml); a role's
    C(vars/main.yml) wins over both, as Ansible ranks role vars - templated with the host's variables over the
    roles' defaults.
  - For a play or a role that runs before the role whose setting it needs (C(site.yml) sorting hosts by the server's
    revision file, the rolling role's snapshot of the server's files, gpu_health telling the server's own processes),
    so that the role's default is written once, in the role.
  - A name no role defines fails the lookup, naming it.
options:
  _terms:
    description: The variables' names, for example C(sglang_server_log_dir) or C(__sglang_server_config_path).
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Look for the revision of a healthy start
  ansible.builtin.stat:
    path: "{{ lookup('inferops.gpu.role_setting', 'sglang_server_log_dir') }}/revision"
"""

RETURN = r"""
_raw:
  description: The values, one per name, in order.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.inferops.gpu.plugins.plugin_utils.role_settings import (
    Settings, Unresolved, load_file, load_role_variables,
)


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        defaults, role_vars = load_role_variables(lambda path: load_file(self._loader, path))
        settings = Settings(self._templar, variables or {}, defaults, role_vars)
        values = []
        for name in terms:
            try:
                values.append(settings.get(name))
            except Unresolved:
                raise AnsibleLookupError('role_setting: %s' % '; '.join(settings.problems))
        return values
