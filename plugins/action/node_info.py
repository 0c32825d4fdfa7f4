# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller half of inferops.gpu.node_info: the roles' settings, resolved as the roles resolve them.

The module reads a node where the roles put things; where that is comes from the roles' own
variables, never typed again: the host's variables (inventory, -e) over the roles' defaults/main.yml,
with the names the roles derive from them in their vars/main.yml (the toolkit's home, the server's
config, unit and log paths, the probe's host, rank and warmup, runtime_env's merged NCCL profiles and
topology map, ml_env's built-in profiles), all templated with this host's variables. Options the task
gives win. The parts the report compares on the controller are added to the module's result: the
SHA-256 of the lock the profile names (found as the ml_env role finds it), the NCCL settings and
profiles, and the gateway host (the rolling role's rolling_gateway_host).

A setting that cannot be templated (bad inventory) leaves its part unread, with a warning: the
report shows '-' for it and the host still reports.
"""

from __future__ import annotations

import hashlib
import os

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.inferops.gpu.plugins.plugin_utils.role_settings import (  # noqa: F401 (re-exported: the tests use them)
    ROOT, Settings, Unresolved, load_file, load_role_variables,
)

display = Display()
# Each option of the module, as the roles' variable that holds it.
OPTIONS = {
    'cuda_home': '__cuda_toolkit_home',
    'cuda_toolkit_root': 'cuda_toolkit_root',
    'ml_env_path': 'ml_env_path',
    'runtime_env_spec': '__runtime_env_spec_path',
    'state_dir': 'sglang_server_state_dir',
}
# The server, as the sglang_server role sets it up and probes it (its tasks/gate.yml).
SERVER = {
    'config': '__sglang_server_config_path',
    'manager': 'sglang_server_manager',
    'unit': '__sglang_server_unit',
    'unit_file': '__sglang_server_unit_path',
    'log_path': '__sglang_server_log_path',
    'run_dir': 'sglang_server_log_dir',
    'host': '__sglang_server_probe_host',
    'port': 'sglang_server_port',
    'api_key': 'sglang_server_api_key',
    'served_model_name': 'sglang_server_served_model_name',
    'skip_warmup': '__sglang_server_skip_warmup',
    'ready_line': '__sglang_server_ready_line',
    'probe': '__sglang_server_probe',
}
SERVER_BOOLS = ('skip_warmup', 'ready_line', 'probe')
# Added to the result: what the report compares on the controller.
REPORT = {
    'nccl_profile': 'runtime_env_nccl_profile',
    'nccl_topology': 'runtime_env_topology',
    'nccl_profiles': '__runtime_env_nccl_profiles_merged',
    'nccl_topology_map': '__runtime_env_topology_profiles_merged',
    'gateway_host': 'rolling_gateway_host',
}
# The ml_env role's profile: the built-ins with ml_env_profiles merged over them (its tasks/validate.yml).
PROFILE = ('ml_env_profile', 'ml_env_profiles', '__ml_env_builtin_profiles')


def _str(value):
    return '' if value is None else str(value)


def module_args(settings):
    """The module's options from the roles' variables; an option that cannot be resolved is left out."""
    args = {}
    for option, name in OPTIONS.items():
        try:
            args[option] = _str(settings.get(name)) or None
        except Unresolved:
            continue
    server = {}
    try:
        for option, name in SERVER.items():
            value = settings.get(name)
            if option in SERVER_BOOLS:
                value = boolean(value, strict=False)
            elif option == 'port':
                value = int(value)
            else:
                value = _str(value) or None
            server[option] = value
    except (Unresolved, TypeError, ValueError) as exc:
        if not isinstance(exc, Unresolved):
            settings.problems.append('sglang_server_port: %s' % exc)
        server = None
    if server is not None:
        args['server'] = server
    return args


def lock_wanted(settings, find):
    """The SHA-256 of the lock the host's ml_env profile names; 'none' without one, 'unreadable' when find(path)
    finds no readable file (or the profile cannot be resolved)."""
    try:
        name, profiles, builtin = [settings.get(variable) for variable in PROFILE]
    except Unresolved:
        return 'unreadable'
    merged = dict(builtin) if isinstance(builtin, dict) else {}
    merged.update(profiles if isinstance(profiles, dict) else {})
    profile = merged.get(name) if isinstance(name, str) else None
    path = profile.get('lock') if isinstance(profile, dict) else None
    if not isinstance(path, str) or not path:
        return 'none'
    try:
        with open(find(path), 'rb') as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except Exception:  # pylint: disable=broad-except
        return 'unreadable'


def find_lock(path, find_needle, root=ROOT):
    """A lock's path as the ml_env role's file lookup finds it: an absolute one as it is, a relative one in the
    role's files/, else where find_needle(path) finds it (the playbook's files/ or directory; raises when nowhere)."""
    if os.path.isabs(path):
        return path
    in_role = os.path.join(root, 'roles', 'ml_env', 'files', path)
    if os.path.isfile(in_role):
        return in_role
    return find_needle(path)


def report_parts(settings, find):
    parts = {'lock_wanted': lock_wanted(settings, find)}
    for key, name in REPORT.items():
        try:
            parts[key] = settings.get(name)
        except Unresolved:
            continue
    for key in ('nccl_profile', 'nccl_topology', 'gateway_host'):
        if key in parts:
            parts[key] = _str(parts[key])
    return parts


def merged_args(resolved, given):
    """The task's options over the resolved ones (server by key)."""
    args = dict(resolved)
    for key, value in (given or {}).items():
        if key == 'server' and isinstance(value, dict) and isinstance(args.get('server'), dict):
            args['server'] = dict(args['server'], **value)
        else:
            args[key] = value
    return args


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        defaults, role_vars = load_role_variables(self._load)
        settings = Settings(self._templar, task_vars, defaults, role_vars)
        args = merged_args(module_args(settings), self._task.args)
        parts = report_parts(settings, self._find_lock)
        result.update(self._execute_module(module_name='inferops.gpu.node_info', module_args=args, task_vars=task_vars))
        result.update(parts)
        # Through Display: ansible-core 2.19 and later want structured warnings in a result, not strings.
        for problem in settings.problems:
            display.warning('node_info on %s: a part is not read, its setting cannot be resolved: %s'
                            % (task_vars.get('inventory_hostname', '?'), problem))
        return result

    def _load(self, path):
        return load_file(self._loader, path)

    def _find_lock(self, path):
        return find_lock(path, lambda relative: self._find_needle('files', relative))
