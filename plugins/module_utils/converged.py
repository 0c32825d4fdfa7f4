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
and the node goes through the roles. Every read goes through ``Host``, so the tests drive it on a
temporary directory with stand-ins for systemctl, HTTP and the release check.
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


class Host:
    """The reads the record needs. run_command: (argv) -> (rc, out, err), bounded by the caller;
    http_status: (url, timeout) -> (status or None, reason); integrity: (release dir) -> '' or why
    the release is damaged."""

    def __init__(self, run_command, http_status, integrity):
        self.run_command = run_command
        self.http_status = http_status
        self.integrity = integrity

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
    }


def build_record(host, digest, spec):
    spec = dict((key, spec[key]) for key in SPEC_KEYS)
    spec['paths'] = sorted(set(spec['paths']))
    spec['units'] = sorted(set(spec['units']))
    spec['releases'] = sorted(set(spec['releases']))
    return {'version': VERSION, 'digest': digest, 'spec': spec, 'state': observe(host, spec)}


def _describe(state):
    kind = state.get('kind')
    if kind == 'link':
        return 'a link to %s' % state['target']
    if kind in ('file', 'dir'):
        return 'a %s (mode %s, uid %s, gid %s)' % (kind, state['mode'], state['uid'], state['gid'])
    return kind


def path_drift(path, was, now):
    if was == now:
        return None
    if was.get('kind') == now.get('kind') == 'file' and {key: was.get(key) for key in ('mode', 'uid', 'gid')} == \
            {key: now.get(key) for key in ('mode', 'uid', 'gid')}:
        return '%s: its content changed' % path
    return '%s: was %s, is %s' % (path, _describe(was), _describe(now))


def drift(host, record, digest, timeout):
    """What differs between the record and the node now, cheapest reads first. The release check and
    the health request (the costly ones) run only when nothing cheaper differs."""
    found = []
    if record.get('digest') != digest:
        found.append('the input changed since the last converge (inventory variables or the collection)')
    spec = record.get('spec') or {}
    if spec_problems(spec) or set(SPEC_KEYS) - set(spec):
        return found + ['the record holds an unusable spec']
    was = record.get('state') or {}
    now = observe(host, spec)
    for path in spec['paths']:
        reason = path_drift(path, (was.get('paths') or {}).get(path, {}), now['paths'][path])
        if reason:
            found.append(reason)
    for unit in spec['units']:
        before, after = (was.get('units') or {}).get(unit, {}), now['units'][unit]
        if before != after:
            found.append('%s: was %s and %s, is %s and %s' % (
                unit, before.get('active'), before.get('enabled'), after['active'], after['enabled']))
    if was.get('gpus') != now['gpus']:
        found.append('the GPUs or the driver changed: was %s, is %s' % (
            json.dumps(was.get('gpus')), json.dumps(now['gpus'])))
    if found:
        return found
    for link in spec['releases']:
        target = os.path.realpath(link)
        why = host.integrity(target)
        if why:
            found.append('release %s (%s): %s' % (target, link, why))
    if spec['health_url'] and not found:
        status, reason = host.http_status(spec['health_url'], timeout)
        if status != 200:
            found.append('%s answered %s' % (spec['health_url'], status if status is not None else reason))
    return found


def check(host, path, digest, timeout):
    record, why = host.read_record(path)
    if record is None:
        return {'converged': False, 'drift': [why]}
    found = drift(host, record, digest, timeout)
    return {'converged': not found, 'drift': found}


def dumps(record):
    return json.dumps(record, indent=1, sort_keys=True)


def record_changes(host, path, new):
    """True when the record at path differs from new (a rerun over an unchanged node writes nothing)."""
    old, dummy = host.read_record(path)
    return old != new
