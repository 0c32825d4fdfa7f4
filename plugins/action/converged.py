# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller half of inferops.gpu.converged: the digest of a node's input, then the module."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re

from ansible import constants as C
from ansible.plugins.action import ActionBase

from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import is_secret
from ansible_collections.inferops.gpu.plugins.module_utils.fleet.converged import ROLES
from ansible_collections.inferops.gpu.plugins.plugin_utils.role_settings import (
    Settings, Unresolved, load_file, load_role_variables,
)

# The variables that describe what a node should be: every role's and the collection-wide ones.
PREFIXES = ('inferops_', 'cuda_toolkit_', 'ml_env_', 'runtime_env_', 'gpu_health_', 'sglang_server_', 'rolling_')
# These steer a run (which hosts, how many at once, how hard to look) and say nothing about the node.
STEERING = frozenset([
    'inferops_fast_path', 'inferops_converged', 'inferops_converged_hosts', 'inferops_validate_hosts',
    'inferops_validate_all_or_nothing', 'inferops_fast_path_key_file', 'rolling_serial', 'rolling_hosts',
    'rolling_validated',
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
# What a template reads that only the run knows: gathered facts (ansible_facts, ansible_local, or a fact
# injected as ansible_<name>). The fast path gathers none, so a value built on one is never taken as unchanged.
TEMPLATE = re.compile(r'{[{%]')
IDENTIFIER = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
FACTS = frozenset(['ansible_facts', 'ansible_local'])
# ansible_* names that are connection settings or magic variables, not facts (present or not).
NOT_FACTS = ('ansible_host', 'ansible_port', 'ansible_user', 'ansible_connection', 'ansible_become', 'ansible_ssh',
             'ansible_password', 'ansible_private_key', 'ansible_python_interpreter', 'ansible_shell',
             'ansible_pipelining', 'ansible_timeout', 'ansible_docker', 'ansible_play_', 'ansible_check_mode',
             'ansible_diff_mode', 'ansible_version', 'ansible_run_tags', 'ansible_skip_tags', 'ansible_limit',
             'ansible_inventory_sources', 'ansible_config_file', 'ansible_verbosity', 'ansible_forks',
             'ansible_collection_name', 'ansible_role_', 'ansible_parent_role', 'ansible_loop', 'ansible_index_var',
             'ansible_search_path', 'ansible_dependent_role_names', 'ansible_playbook_python')
# Names a template may use that are not the inventory's own values (followed no further).
MAGIC = frozenset(['hostvars', 'groups', 'vars', 'group_names', 'inventory_hostname', 'play_hosts', 'omit'])


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


def _keyed(key, value):
    """HMAC-SHA256 of a value's JSON: the digests hold the resolved values (secrets among them), so only the
    holder of the key can test a guess against a record."""
    return hmac.new(key, json.dumps(value, sort_keys=True, default=str).encode('utf-8'), hashlib.sha256).hexdigest()


def input_names(task_vars, defaults, role_vars):
    """Every variable of the input: the roles' own (defaults and vars) and those the host sets."""
    return sorted(name for name in set(defaults) | set(role_vars) | set(task_vars)
                  if isinstance(name, str) and name.startswith(PREFIXES) and name not in STEERING)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def reads_facts(value, task_vars, seen=None):
    """The fact a value's templates read, following the host's variables they name ('' when none): such a
    value is what the facts are when the roles run, which the fast path never sees."""
    seen = set() if seen is None else seen
    for text in _strings(value):
        if not TEMPLATE.search(text):
            continue
        for name in IDENTIFIER.findall(text):
            if name in seen or name in MAGIC:
                continue
            seen.add(name)
            if name in FACTS or (name.startswith('ansible_') and name not in task_vars
                                 and not name.startswith(NOT_FACTS)):
                return name
            if name in task_vars:
                found = reads_facts(task_vars[name], task_vars, seen)
                if found:
                    return found
    return ''


def resolve(settings, names, task_vars):
    """({name: value as the roles see it}, {name: why it is known only when the roles run})."""
    values, unresolved = {}, {}
    for name in names:
        fact = reads_facts(task_vars[name], task_vars) if name in task_vars else ''
        if fact:
            unresolved[name] = 'it reads the gathered fact %s' % fact
            continue
        try:
            values[name] = settings.get(name)
        except Unresolved:
            why = settings.problems[-1].split(': ', 1)[-1] if settings.problems else ''
            # Jinja's message may quote a value: a secret's is never shown.
            unresolved[name] = ('its template fails on the controller: %s' % why[:200]
                                if why and not is_secret(name) else 'its template fails on the controller')
    return values, unresolved


def input_digest(values, code, files=None, key=b''):
    """values: the resolved variables; files: what input files (a profile's lock) hold, by name: a lock changed
    in place is a changed input."""
    return _keyed(key, {'code': code, 'vars': values, 'files': files or {}})


def role_digests(values, codes, files=None, key=b''):
    """{role: the digest of its own input}: its variables and code, the shared variables and code,
    and for ml_env the lock files. A role's variables are read only by it and the roles after it
    (each consumes the facts of those before), so a changed digest re-runs the role and those after."""
    shared = dict((name, value) for name, value in values.items() if name.startswith(SHARED_PREFIXES))
    found = {}
    for role in NODE_ROLES:
        own = dict((name, value) for name, value in values.items() if name.startswith(role + '_'))
        found[role] = _keyed(key, {'code': codes.get(role), 'shared_code': codes.get(SHARED), 'vars': own,
                                   'shared_vars': shared, 'files': (files or {}) if role == 'ml_env' else {}})
    return found


def key_file(task_vars):
    """The controller's fast-path key: inferops_fast_path_key_file, else <ANSIBLE_HOME>/inferops/fast-path.key."""
    path = task_vars.get('inferops_fast_path_key_file') or ''
    if not path:
        home = C.config.get_config_value('ANSIBLE_HOME') or os.path.expanduser('~/.ansible')
        path = os.path.join(os.path.expanduser(str(home)), 'inferops', 'fast-path.key')
    return os.path.expanduser(str(path))


def fast_path_key(path):
    """The key's bytes, made (32 random bytes, mode 0600) when there is none. Made once even when forks race:
    each writes its own file and links it to the name, and the first link wins."""
    try:
        with open(path, 'rb') as handle:
            key = handle.read()
        if key:
            return key
    except FileNotFoundError:
        pass
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    temporary = '%s.%s' % (path, os.urandom(8).hex())
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(descriptor, os.urandom(32).hex().encode('ascii'))
    finally:
        os.close(descriptor)
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass
    finally:
        os.remove(temporary)
    with open(path, 'rb') as handle:
        return handle.read()


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
            try:
                key = fast_path_key(key_file(task_vars))
            except OSError as err:
                result.update(failed=True, msg='inferops_fast_path_key_file: the fast path\'s key %s cannot be read '
                                               'or made (%s)' % (key_file(task_vars), err.strerror or err))
                return result
            defaults, role_vars = load_role_variables(lambda path: load_file(self._loader, path))
            settings = Settings(self._templar, task_vars, defaults, role_vars)
            values, unresolved = resolve(settings, input_names(task_vars, defaults, role_vars), task_vars)
            codes, files = code_digests(), self._lock_files(task_vars)
            args['digest'] = input_digest(values, _sha256(codes), files, key)
            args['digests'] = role_digests(values, codes, files, key)
            if args.get('state', 'checked') == 'checked':
                args['unresolved'] = unresolved
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
