# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller half of inferops.gpu.converged: the digest of a node's input, then the module."""

from __future__ import annotations

import hashlib
import json
import os

from ansible.plugins.action import ActionBase

from ansible_collections.inferops.gpu.plugins.module_utils.fleet.converged import ROLES

# The variables that describe what a node should be: every role's and the collection-wide ones.
PREFIXES = ('inferops_', 'cuda_toolkit_', 'ml_env_', 'runtime_env_', 'gpu_health_', 'sglang_server_', 'rolling_')
# These steer a run (which hosts, how many at once, how hard to look) and say nothing about the node.
STEERING = frozenset([
    'inferops_fast_path', 'inferops_converged', 'inferops_converged_hosts', 'inferops_validate_hosts',
    'inferops_validate_all_or_nothing', 'rolling_serial', 'rolling_hosts', 'rolling_validated',
])
# The collection's code: a changed template, default or module is a changed input (a README is not).
CODE_DIRS = ('meta', 'playbooks', 'plugins', 'roles')
# The roles a node runs, each with its own digest (module_utils/fleet/converged.py: ROLES); the rest of
# the code (plugins, playbooks, the rolling role) and the variables named inferops_* and rolling_*
# count for every role.
NODE_ROLES = ROLES
SHARED = 'shared'
SHARED_PREFIXES = ('inferops_', 'rolling_')
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _code_owner(relative):
    parts = relative.split(os.sep)
    return parts[1] if parts[0] == 'roles' and len(parts) > 2 and parts[1] in NODE_ROLES else SHARED


def code_digests(root=ROOT):
    """{node role or 'shared': SHA-256 over the relative path and content of its files under CODE_DIRS}."""
    digests = dict((name, hashlib.sha256()) for name in NODE_ROLES + (SHARED,))
    for top in CODE_DIRS:
        for base, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(name for name in dirs if name != '__pycache__')
            for name in sorted(files):
                # Byte code and documentation change nothing on a node.
                if name.endswith(('.pyc', '.md')):
                    continue
                path = os.path.join(base, name)
                relative = os.path.relpath(path, root)
                digest = digests[_code_owner(relative)]
                digest.update(relative.encode('utf-8') + b'\0')
                with open(path, 'rb') as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())
    return dict((name, digest.hexdigest()) for name, digest in digests.items())


def code_digest(root=ROOT):
    """One SHA-256 over all of the collection's code."""
    return _sha256(code_digests(root))


def _sha256(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode('utf-8')).hexdigest()


def input_variables(task_vars):
    """The variables of the input, by name, as written (templates unrendered)."""
    return dict((name, value) for name, value in task_vars.items()
                if name.startswith(PREFIXES) and name not in STEERING)


def input_digest(task_vars, code, files=None):
    """files: what input files (a profile's lock) hold, by name: a lock changed in place is a changed input."""
    return _sha256({'code': code, 'vars': input_variables(task_vars), 'files': files or {}})


def role_digests(task_vars, codes, files=None):
    """{role: the digest of its own input}: its variables and code, the shared variables and code,
    and for ml_env the lock files. A role's variables are read only by it and the roles after it
    (each consumes the facts of those before), so a changed digest re-runs the role and those after."""
    variables = input_variables(task_vars)
    shared = dict((name, value) for name, value in variables.items() if name.startswith(SHARED_PREFIXES))
    found = {}
    for role in NODE_ROLES:
        own = dict((name, value) for name, value in variables.items() if name.startswith(role + '_'))
        found[role] = _sha256({'code': codes.get(role), 'shared_code': codes.get(SHARED), 'vars': own,
                               'shared_vars': shared, 'files': (files or {}) if role == 'ml_env' else {}})
    return found


def lock_files(profiles, find):
    """{profile: SHA-256 of its lock file} for the profiles that name one; find(path) -> the file's path
    on the controller (raises when it is not there: then 'unreadable', and the roles say why)."""
    found = {}
    for name, profile in sorted(profiles.items()) if isinstance(profiles, dict) else []:
        path = profile.get('lock') if isinstance(profile, dict) else None
        if not isinstance(path, str) or not path:
            continue
        try:
            with open(find(path), 'rb') as handle:
                found[str(name)] = hashlib.sha256(handle.read()).hexdigest()
        except Exception:  # pylint: disable=broad-except
            found[str(name)] = 'unreadable'
    return found


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        task_vars = task_vars or {}
        if args.get('state', 'checked') != 'absent' and not args.get('digest'):
            codes, files = code_digests(), self._lock_files(task_vars)
            args['digest'] = input_digest(task_vars, _sha256(codes), files)
            args['digests'] = role_digests(task_vars, codes, files)
        if args.get('state') == 'recorded' and args.get('facts'):
            args['facts'] = self._fact_values(args['facts'], task_vars)
        result.update(self._execute_module(module_name='inferops.gpu.converged', module_args=args,
                                           task_vars=task_vars))
        return result

    def _fact_values(self, names, task_vars):
        """{role: [fact names]} -> {role: {name: value}} of those the run has (the facts a skipped role
        hands on next time)."""
        found = {}
        for role, listed in (names or {}).items():
            found[role] = {}
            for name in listed or []:
                if name in task_vars:
                    found[role][name] = self._templar.template(task_vars[name])
        return found

    def _lock_files(self, task_vars):
        """The lock files the profiles name, by content (ml_env's profiles are templates and their lock
        paths are found as Ansible finds files)."""
        try:
            profiles = self._templar.template(task_vars.get('ml_env_profiles') or {})
        except Exception:  # pylint: disable=broad-except
            return {'ml_env_profiles': 'not templated here'}
        return lock_files(profiles, lambda path: path if os.path.isabs(path) else self._find_needle('files', path))
