# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The record of a node's last converge, and whether the node still is what it records.

A run that converged a node records the digest of its input (the inventory's variables and the
collection's code, computed on the controller) with what the node had then: the state of every
managed path (a small file by SHA-256, a large one by size and mtime, a link by its target, a
directory by mode and owner, or absent), the units' active and enabled states, the GPUs and driver
the kernel lists, the ml-env releases (checked against their RECORDs) and the server's health URL.
A later run with the same digest whose node still matches all of it has nothing to do: site.yml
skips that node (the fast path). Anything else, a missing or unreadable record included, is drift,
and the node goes through the roles.

The record also keeps each role's own digest (its variables and code), which paths each role
manages, and the facts each role published. A node whose drift belongs to one role goes through
that role and those after it (each consumes the facts of those before), never fewer than the
health gate and the server; the roles it skips hand on their recorded facts. Drift that belongs to
no one role (the GPUs, the server's health, an unowned path, an old record) sends it through all.
Every read goes through ``Host``, so the tests drive it on a temporary directory with stand-ins for
systemctl, HTTP and the release check.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat as stat_module

VERSION = 1
# Larger files (the toolkit's binaries) are compared by size and mtime: hashing them on every run costs.
HASH_LIMIT = 1 << 20
SPEC_KEYS = ('paths', 'units', 'health_url', 'releases', 'gpu_dir')
# A node's roles in data-flow order (roles/rolling/tasks/provision.yml): each reads the facts of
# those before it and none reads those after, so a role's drift re-runs it and every later one.
ROLES = ('cuda_toolkit', 'ml_env', 'runtime_env', 'gpu_health', 'sglang_server')
# Who owns what the record keeps besides paths: the units are the server's, the release ml_env's.
UNIT_OWNER = 'sglang_server'
RELEASE_OWNER = 'ml_env'
# The node's fitness check runs before any server (re)start, whatever else is pending.
GATE = 'gpu_health'


class Host:
    """The reads the record needs. run_command: (argv) -> (rc, out, err), bounded by the caller;
    http_status: (url, timeout) -> (status or None, reason); integrity: (release dir) -> '' or why
    the release is damaged."""

    def __init__(self, run_command, http_status, integrity, os_release='/etc/os-release'):
        self.run_command = run_command
        self.http_status = http_status
        self.integrity = integrity
        self.os_release = os_release

    def os_identity(self):
        """The facts the roles' own templates read (the distribution, its version, the architecture: the
        toolkit's apt repository, the OS family check), from the node as the roles' fact gathering finds
        them: the fast path gathers no facts, so a node whose OS changed goes through the roles."""
        found = {'machine': os.uname().machine}
        try:
            with open(self.os_release, encoding='utf-8', errors='replace') as handle:
                for line in handle:
                    key, sep, value = line.strip().partition('=')
                    if sep and key in ('ID', 'ID_LIKE', 'VERSION_ID'):
                        found[key.lower()] = value.strip().strip('"\'')
        except OSError:
            found['os_release'] = 'unreadable'
        return found

    def path_state(self, path):
        try:
            found = os.lstat(path)
        except FileNotFoundError:
            return {'kind': 'absent'}
        except OSError as err:
            return {'kind': 'unreadable', 'error': err.strerror or str(err)}
        owner = {'mode': '%04o' % stat_module.S_IMODE(found.st_mode), 'uid': found.st_uid, 'gid': found.st_gid}
        if stat_module.S_ISLNK(found.st_mode):
            return {'kind': 'link', 'target': os.readlink(path)}
        if stat_module.S_ISDIR(found.st_mode):
            return dict(owner, kind='dir')
        if not stat_module.S_ISREG(found.st_mode):
            return {'kind': 'other'}
        if found.st_size > HASH_LIMIT:
            return dict(owner, kind='file', size=found.st_size, mtime_ns=found.st_mtime_ns)
        digest = hashlib.sha256()
        try:
            with open(path, 'rb') as handle:
                for block in iter(lambda: handle.read(1 << 20), b''):
                    digest.update(block)
        except OSError as err:
            return {'kind': 'unreadable', 'error': err.strerror or str(err)}
        return dict(owner, kind='file', sha256=digest.hexdigest())

    def unit_state(self, unit):
        state = {}
        for verb in ('is-active', 'is-enabled'):
            dummy, out, dummy = self.run_command(['systemctl', verb, unit])
            state[verb[3:]] = (out or '').strip().splitlines()[0] if (out or '').strip() else 'unknown'
        return state

    def gpus(self, gpu_dir):
        """The GPUs the driver lists (PCI addresses) and its version line: no nvidia-smi round trip."""
        try:
            devices = sorted(os.listdir(os.path.join(gpu_dir, 'gpus')))
        except OSError:
            devices = []
        try:
            with open(os.path.join(gpu_dir, 'version'), encoding='utf-8', errors='replace') as handle:
                driver = handle.readline().strip()
        except OSError:
            driver = ''
        return {'devices': devices, 'driver': driver}

    def read_record(self, path):
        """(record, why it is unusable or '')."""
        try:
            with open(path, encoding='utf-8') as handle:
                record = json.load(handle)
        except FileNotFoundError:
            return None, 'no record of a converge at %s' % path
        except (OSError, ValueError) as err:
            return None, 'the record %s is unreadable (%s)' % (path, err)
        if not isinstance(record, dict) or record.get('version') != VERSION:
            return None, 'the record %s has another format' % path
        return record, ''


def spec_problems(spec):
    """What is wrong with a record's spec: absolute paths only, HTTP(S) health URL."""
    problems = []
    for key in ('paths', 'releases'):
        bad = [path for path in spec.get(key) or [] if not isinstance(path, str) or not path.startswith('/')]
        if bad:
            problems.append('%s: every path must be absolute (got %s)' % (key, ', '.join(map(repr, bad))))
    url = spec.get('health_url') or ''
    if url and not url.startswith(('http://', 'https://')):
        problems.append('health_url: must start with http:// or https:// (got %r)' % url)
    return problems


def observe(host, spec):
    """The cheap part of what the record keeps: paths, units, GPUs."""
    return {
        'paths': dict((path, host.path_state(path)) for path in spec['paths']),
        'units': dict((unit, host.unit_state(unit)) for unit in spec['units']),
        'gpus': host.gpus(spec['gpu_dir']),
        'os': host.os_identity(),
    }


def build_record(host, digest, spec, digests=None, owners=None, facts=None):
    """digests: {role: digest of its own input}; owners: {role: the paths it manages}; facts: {role:
    {name: value}} it published. All three may be left out (then any drift sends a node through
    every role)."""
    spec = dict((key, spec[key]) for key in SPEC_KEYS)
    spec['paths'] = sorted(set(spec['paths']))
    spec['units'] = sorted(set(spec['units']))
    spec['releases'] = sorted(set(spec['releases']))
    return {'version': VERSION, 'digest': digest, 'spec': spec, 'state': observe(host, spec),
            'digests': dict(digests or {}),
            'owners': dict((role, sorted(set(paths or []))) for role, paths in (owners or {}).items()),
            'facts': dict(facts or {})}


def _describe(state):
    kind = state.get('kind')
    if kind == 'link':
        return 'a link to %s' % state['target']
    if kind in ('file', 'dir'):
        return 'a %s (mode %s, uid %s, gid %s)' % (kind, state['mode'], state['uid'], state['gid'])
    return kind


def not_serving(host, record, timeout):
    """Why a node is not fit to be recorded as converged ([] when it is). A node that should serve (a
    health URL in the spec) must have every unit active and the URL answering 200 at the time of the
    record: a server that crashed after its gate (a unit in auto-restart is `activating`) is no
    converge, and recording it would let the next run's fast path skip a dead node."""
    spec = record['spec']
    if not spec['health_url']:
        return []
    problems = ['%s is %s, not active' % (unit, state.get('active'))
                for unit, state in sorted(record['state']['units'].items()) if state.get('active') != 'active']
    status, reason = host.http_status(spec['health_url'], timeout)
    if status != 200:
        problems.append('%s answered %s' % (spec['health_url'], status if status is not None else reason))
    return problems


def path_drift(path, was, now):
    if was == now:
        return None
    if was.get('kind') == now.get('kind') == 'file' and {key: was.get(key) for key in ('mode', 'uid', 'gid')} == \
            {key: now.get(key) for key in ('mode', 'uid', 'gid')}:
        return '%s: its content changed' % path
    return '%s: was %s, is %s' % (path, _describe(was), _describe(now))


def input_drift(record, digests):
    """The roles whose own input differs from the record's; None when that cannot be told (no digests
    on one side: then every role)."""
    recorded = record.get('digests') or {}
    if not digests or not recorded:
        return None
    return [role for role in ROLES if recorded.get(role) != digests.get(role)]


def owner_of(record, path):
    """The role that manages path, or None (the rollback's snapshot files, or an old record)."""
    for role in ROLES:
        if path in ((record.get('owners') or {}).get(role) or []):
            return role
    return None


def pending_roles(hit):
    """The roles a node goes through when hit (roles, or None for all) drifted: from the first hit
    onward, and always the health gate before the server."""
    if hit is None:
        return list(ROLES)
    if not hit:
        return []
    first = min(min(ROLES.index(role) for role in hit), ROLES.index(GATE))
    return list(ROLES[first:])


def variable_owner(name):
    """The node role a variable belongs to by its prefix, or None (inferops_*, rolling_*: every role)."""
    for role in ROLES:
        if name.startswith(role + '_'):
            return role
    return None


def unresolved_drift(unresolved):
    """(reasons, roles or None for all) for the variables whose value the fast path cannot know before the
    roles run (a fact, a registered result, a template that fails): the roles that read them go through."""
    found, hit = [], set()
    for name, why in sorted((unresolved or {}).items()):
        found.append('%s: its value is known only when the roles run (%s)' % (name, why))
        owner = variable_owner(name)
        if owner is None or hit is None:
            hit = None
        else:
            hit.add(owner)
    return found, hit


def attributed_drift(host, record, digest, timeout, digests=None, unresolved=None):
    """(what differs, the roles it belongs to or None for all), cheapest reads first. The release
    check and the health request (the costly ones) run only when their answer could still matter:
    the release unless ml_env is pending already, the health unless every role is. unresolved: {variable:
    why} whose values could not be known on the controller: drift of the roles that read them."""
    found, hit = unresolved_drift(unresolved)
    if record.get('digest') != digest:
        found.append('the input changed since the last converge (inventory variables or the collection)')
        roles = input_drift(record, digests)
        if roles is None:
            hit = None
        else:
            found.extend('%s: its input changed' % role for role in roles)
            hit = None if hit is None else hit | set(roles)
    spec = record.get('spec') or {}
    if spec_problems(spec) or set(SPEC_KEYS) - set(spec):
        return found + ['the record holds an unusable spec'], None
    was = record.get('state') or {}
    now = observe(host, spec)

    def blame(reason, role):
        found.append(reason)
        return None if role is None or hit is None else hit | set([role])

    for path in spec['paths']:
        reason = path_drift(path, (was.get('paths') or {}).get(path, {}), now['paths'][path])
        if reason:
            hit = blame(reason, owner_of(record, path))
    for unit in spec['units']:
        before, after = (was.get('units') or {}).get(unit, {}), now['units'][unit]
        if before != after:
            hit = blame('%s: was %s and %s, is %s and %s' % (
                unit, before.get('active'), before.get('enabled'), after['active'], after['enabled']), UNIT_OWNER)
    if was.get('gpus') != now['gpus']:
        hit = blame('the GPUs or the driver changed: was %s, is %s' % (
            json.dumps(was.get('gpus')), json.dumps(now['gpus'])), None)
    if was.get('os') != now['os']:
        hit = blame('the operating system changed: was %s, is %s' % (
            json.dumps(was.get('os'), sort_keys=True), json.dumps(now['os'], sort_keys=True)), None)
    if hit is None:
        return found, None
    if RELEASE_OWNER not in pending_roles(hit):
        for link in spec['releases']:
            target = os.path.realpath(link)
            why = host.integrity(target)
            if why:
                hit = blame('release %s (%s): %s' % (target, link, why), RELEASE_OWNER)
    if spec['health_url'] and pending_roles(hit) != list(ROLES):
        status, reason = host.http_status(spec['health_url'], timeout)
        if status != 200:
            hit = blame('%s answered %s' % (spec['health_url'], status if status is not None else reason), None)
    if found and not record.get('digests'):
        hit = None  # a record without the roles' digests says nothing about which role owns what
    return found, hit


def check(host, path, digest, timeout, digests=None, unresolved=None):
    """converged, drift, pending (the roles to run, in order) and facts (those the skipped roles
    published, by name)."""
    record, why = host.read_record(path)
    if record is None:
        return {'converged': False, 'drift': [why], 'pending': list(ROLES), 'facts': {}}
    found, hit = attributed_drift(host, record, digest, timeout, digests, unresolved)
    pending = pending_roles(hit) if found else []
    facts = {}
    for role in ROLES:
        if role not in pending:
            facts.update((record.get('facts') or {}).get(role) or {})
    return {'converged': not found, 'drift': found, 'pending': pending, 'facts': facts}


def dumps(record):
    return json.dumps(record, indent=1, sort_keys=True)


def record_changes(host, path, new):
    """True when the record at path differs from new (a rerun over an unchanged node writes nothing)."""
    old, dummy = host.read_record(path)
    return old != new
