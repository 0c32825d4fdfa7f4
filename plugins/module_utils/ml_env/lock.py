# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stack's lock (the filters of plugins/filter/lock.py and ml_env's input checks read it): the
full transitive set with hashes (``uv pip compile --generate-hashes``), read on the controller
and checked against the profile's pins before anything is installed (README, "One lock for the
fleet")."""

from __future__ import annotations

import re

try:
    from packaging.version import InvalidVersion, Version
except ImportError:  # pragma: no cover - ansible-core depends on packaging
    Version = None
    InvalidVersion = ValueError

# name[extras]==version, then optional environment markers after ';'.
REQUIREMENT = re.compile(r'^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*(?P<version>[^\s;\\]+)\s*(;.*)?\Z')
HASH = re.compile(r'--hash=(sha256:[0-9a-f]{64})\b')


def normal_name(name):
    """PEP 503: FlashInfer_Python and flashinfer-python are one distribution."""
    return re.sub(r'[-_.]+', '-', str(name)).lower()


def same_version(one, other):
    if Version is not None:
        try:
            return Version(str(one)) == Version(str(other))
        except InvalidVersion:
            pass
    return str(one) == str(other)


def _entries(text):
    """(line number, requirement text, hashes) per requirement; continuation lines joined."""
    entries, current, start = [], '', 0
    for number, raw in enumerate(str(text or '').splitlines(), 1):
        line = raw.split(' #', 1)[0].rstrip() if not raw.lstrip().startswith('#') else ''
        if not current:
            start = number
        current += ' ' + line.strip() if current else line.strip()
        if current.endswith('\\'):
            current = current[:-1].rstrip()
            continue
        if current:
            entries.append((start, current))
        current = ''
    if current:
        entries.append((start, current))
    parsed = []
    for number, entry in entries:
        hashes = HASH.findall(entry)
        requirement = HASH.sub('', entry).strip()
        parsed.append((number, requirement, hashes))
    return parsed


def lock_packages(text):
    """{normalised name: [versions]} of a lock (a universal lock may list a name once per marker)."""
    found = {}
    for dummy, requirement, dummy in _entries(text):
        match = REQUIREMENT.match(requirement)
        if match:
            found.setdefault(normal_name(match.group('name')), []).append(match.group('version'))
    return found


def lock_problems(text, pins=None, where='the lock'):
    """Every reason the lock cannot be installed as the exact, hash-checked stack of ``pins``."""
    problems, found = [], {}
    for number, requirement, hashes in _entries(text):
        if requirement.startswith('-'):
            # Installer options uv may write (--index-url ...): the role passes its own.
            continue
        match = REQUIREMENT.match(requirement)
        if not match:
            problems.append('%s line %d: %r is not name==version (a lock pins every distribution exactly)'
                            % (where, number, requirement))
            continue
        name, version = match.group('name'), match.group('version')
        found.setdefault(normal_name(name), []).append(version)
        if not hashes:
            problems.append('%s line %d: %s==%s has no --hash (make the lock with hashes: make lock, or '
                            'uv pip compile --generate-hashes)' % (where, number, name, version))
    if not found and not problems:
        problems.append('%s holds no requirement' % where)
    for name, version in sorted((pins or {}).items()):
        versions = found.get(normal_name(name))
        if not versions:
            problems.append('the profile pins %s %s; %s has no %s: make the lock again from these pins'
                            % (name, version, where, name))
        else:
            other = sorted(set(found_version for found_version in versions if not same_version(found_version, version)))
            if other:
                problems.append('the profile pins %s %s; %s has %s: make the lock again from these pins'
                                % (name, version, where, ', '.join('%s==%s' % (name, item) for item in other)))
    return problems
