# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller half of inferops.gpu.converged: the digest of a node's input, then the module."""

from __future__ import annotations

import hashlib
import json
import os

from ansible.plugins.action import ActionBase

# The variables that describe what a node should be: every role's and the collection-wide ones.
PREFIXES = ('inferops_', 'cuda_toolkit_', 'ml_env_', 'runtime_env_', 'gpu_health_', 'sglang_server_', 'rolling_')
# These steer a run (which hosts, how many at once, how hard to look) and say nothing about the node.
STEERING = frozenset([
    'inferops_fast_path', 'inferops_converged', 'inferops_converged_hosts', 'inferops_validate_hosts',
    'inferops_validate_all_or_nothing', 'rolling_serial', 'rolling_hosts', 'rolling_validated',
])
# The collection's code: a changed template, default or module is a changed input (a README is not).
CODE_DIRS = ('meta', 'playbooks', 'plugins', 'roles')
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def code_digest(root=ROOT):
    """SHA-256 over the relative path and content of every file under CODE_DIRS of root."""
    digest = hashlib.sha256()
    for top in CODE_DIRS:
        for base, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(name for name in dirs if name != '__pycache__')
            for name in sorted(files):
                # Byte code and documentation change nothing on a node.
                if name.endswith(('.pyc', '.md')):
                    continue
                path = os.path.join(base, name)
                digest.update(os.path.relpath(path, root).encode('utf-8') + b'\0')
                with open(path, 'rb') as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


def input_variables(task_vars):
    """The variables of the input, by name, as written (templates unrendered)."""
    return dict((name, value) for name, value in task_vars.items()
                if name.startswith(PREFIXES) and name not in STEERING)


def input_digest(task_vars, code, files=None):
    """files: what input files (a profile's lock) hold, by name: a lock changed in place is a changed input."""
    text = json.dumps({'code': code, 'vars': input_variables(task_vars), 'files': files or {}}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


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
        if args.get('state', 'checked') != 'absent' and not args.get('digest'):
            args['digest'] = input_digest(task_vars or {}, code_digest(), self._lock_files(task_vars or {}))
        result.update(self._execute_module(module_name='inferops.gpu.converged', module_args=args,
                                           task_vars=task_vars))
        return result

    def _lock_files(self, task_vars):
        """The lock files the profiles name, by content (ml_env's profiles are templates and their lock
        paths are found as Ansible finds files)."""
        try:
            profiles = self._templar.template(task_vars.get('ml_env_profiles') or {})
        except Exception:  # pylint: disable=broad-except
            return {'ml_env_profiles': 'not templated here'}
        return lock_files(profiles, lambda path: path if os.path.isabs(path) else self._find_needle('files', path))
