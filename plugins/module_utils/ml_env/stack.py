# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pins, versions and the compatibility rules of an ML stack, evaluated before anything is built.

A rule is data (the ml_env role keeps them in its profiles):

- ``same_version``: ``packages`` pinned together must carry the same version
  (``require_all``: pinning one of them without the others fails too).
- ``requires``: when ``package`` is pinned at ``version``, ``needs.package`` must be pinned at
  ``needs.version``.
- ``cuda_local_tag``: every ``+cuXYZ`` local version label names the CUDA toolkit's major.
- ``cuda_major``: the profile's target CUDA ``major`` is the toolkit's major.
- ``python_version``: the interpreter's ``major.minor`` is one of ``versions``.
- ``newer_than``: each of ``packages`` that is pinned must be newer than the release ``version``,
  as PEP 440's ``>version`` reads it (a post-release or local label of ``version`` is not newer).
  A floor is often on a package no pin names (torch brings NCCL): ``floor_results`` judges what
  a lock resolved, which only the role's input checks read.

Each kind has fields of its own (``RULE_FIELDS``); a rule without them fails by name, kind and
the missing field instead of passing or failing with an empty sentence.

Version patterns: ``2.9.*`` matches a release prefix; ``0.3.21`` matches that public version
with any local label; ``0.3.21+cu130`` matches exactly. ``same_version`` compares public versions
(flashinfer-jit-cache ``0.7.2+cu130`` carries flashinfer-python ``0.7.2``'s version).

Names in pins and rules compare as PEP 503 names (``normalize_name``): ``sglang_kernel`` and
``SGLang-Kernel`` are ``sglang-kernel``. The kernel package changed its name, not its import
(``sgl_kernel``): ``sgl-kernel`` up to 0.3.x, ``sglang-kernel`` from 0.4 on, two distributions, so
a rule names the one of its version.
"""

from __future__ import annotations

import json
import re

RULE_KINDS = ('same_version', 'requires', 'cuda_local_tag', 'cuda_major', 'python_version', 'newer_than')
# The fields each kind cannot do without; needs is {package, version}.
RULE_FIELDS = {
    'same_version': ('packages',),
    'requires': ('package', 'needs'),
    'cuda_local_tag': (),
    'cuda_major': ('major',),
    'python_version': ('versions',),
    'newer_than': ('packages', 'version'),
}
# \Z, not $: $ also matches before a final newline, and "six\n" must not pass as a name.
NAME_RE = re.compile(r'^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?\Z')
# An exact PEP 440 version (no ranges, no wildcards), with an optional local label.
VERSION_RE = re.compile(
    r'^([0-9]+!)?[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?(\+[a-z0-9]+(\.[a-z0-9]+)*)?\Z',
    re.IGNORECASE)
CUDA_VERSION_RE = re.compile(r'^[0-9]+(\.[0-9]+)*\Z')
# A newer_than rule's floor: a final release, so that "newer" needs no pre-release ordering.
RELEASE_RE = re.compile(r'^[0-9]+(\.[0-9]+)*\Z')
_EPOCH_RELEASE_RE = re.compile(r'^(?:([0-9]+)!)?([0-9]+(?:\.[0-9]+)*)')
_CUDA_TAG_RE = re.compile(r'^cu([0-9]+)([0-9])\Z')


def normalize_name(name):
    """PEP 503 normalised distribution name: ``Flashinfer_Python`` -> ``flashinfer-python``."""
    return re.sub(r'[-_.]+', '-', name).lower()


def split_local(version):
    public, _sep, local = str(version).strip().lower().partition('+')
    return public, local.replace('-', '.').replace('_', '.')


def versions_equal(left, right):
    return split_local(left) == split_local(right)


def version_matches(version, pattern):
    """Does an installed or pinned ``version`` satisfy ``pattern`` (see the module docstring)?"""
    if version is None:
        return False
    public, local = split_local(version)
    want_public, want_local = split_local(pattern)
    if want_public.endswith('.*'):
        prefix = want_public[:-2].split('.')
        return public.split('.')[:len(prefix)] == prefix
    if want_local:
        return (public, local) == (want_public, want_local)
    return public == want_public


def _epoch_release(version):
    """(epoch, release without trailing zeros) of a version: 2.26.2.post1 -> (0, (2, 26, 2)); else None."""
    match = _EPOCH_RELEASE_RE.match(str(version).strip()) if version is not None else None
    if not match:
        return None
    numbers = [int(part) for part in match.group(2).split('.')]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return int(match.group(1) or 0), tuple(numbers)


def version_newer(version, floor):
    """Is ``version`` newer than the release ``floor``, as PEP 440's ``>floor``: a later release (2.26.5,
    2.27.0rc1). 2.26.2.post1 and 2.26.2+cu12 are 2.26.2's; text that is no version is not newer."""
    mine, least = _epoch_release(version), _epoch_release(floor)
    return mine is not None and least is not None and mine > least


def cuda_major_of_tag(version):
    """CUDA major named by a ``+cuXYZ`` local label (cu130 -> 13, cu128 -> 12), else None."""
    local = split_local(version)[1]
    for part in local.split('.'):
        match = _CUDA_TAG_RE.match(part)
        if match:
            return int(match.group(1))
    return None


def cuda_major(cuda_version):
    match = re.match(r'^\s*([0-9]+)', str(cuda_version or ''))
    return int(match.group(1)) if match else None


def pin_problems(pins, label='pins'):
    """Names and versions that are not a distribution name mapped to an exact version."""
    problems = []
    for name, version in sorted(pins.items()):
        if not NAME_RE.match(str(name)):
            problems.append('%s: %r is not a distribution name' % (label, name))
        if not VERSION_RE.match(str(version)):
            problems.append('%s: %s %r is not an exact version (allowed: like 2.9.1 or 2.9.1+cu130)'
                            % (label, name, version))
    return problems


def rule_problem(rule):
    """Why ``rule`` cannot be evaluated (unknown kind, a field of its kind missing), else None."""
    kind = rule.get('kind')
    if kind not in RULE_FIELDS:
        return 'unknown rule kind %r (allowed: %s)' % (kind, ', '.join(RULE_KINDS))
    missing = [field for field in RULE_FIELDS[kind] if not rule.get(field)]
    needs = rule.get('needs')
    if kind == 'requires' and needs and not (isinstance(needs, dict) and needs.get('package') and needs.get('version')):
        missing.append('needs.package and needs.version')
    if missing:
        return 'a %s rule needs %s; this one is missing %s' % (
            kind, ', '.join(RULE_FIELDS[kind]), ', '.join(missing))
    if kind == 'same_version' and len(rule['packages']) < 2:
        return 'a same_version rule needs at least two packages; this one has %s' % ', '.join(rule['packages'])
    if kind == 'newer_than' and not RELEASE_RE.match(str(rule['version'])):
        return 'the version of a newer_than rule is a release like 2.26.2; this one has %r' % (rule['version'],)
    if kind == 'cuda_major' and cuda_major(rule['major']) is None:
        return 'the major of a cuda_major rule is a number like 13; this one has %r' % (rule['major'],)
    return None


def cuda_version_problem(cuda_version):
    """Why ``cuda_version`` is not a CUDA version like 13.0, else None."""
    if CUDA_VERSION_RE.match(str(cuda_version)):
        return None
    return '%s is not a CUDA version (allowed: numbers separated by dots, like 13.0 or 12.8.1)' % json.dumps(cuda_version)


def _rule_result(rule, message):
    return {'name': rule.get('name'), 'kind': rule.get('kind'), 'ok': message is None, 'message': message or ''}


def _same_version(rule, pins):
    wanted = rule.get('packages') or []
    present = [(name, pins[normalize_name(name)]) for name in wanted if normalize_name(name) in pins]
    if not present:
        return None
    if rule.get('require_all') and len(present) != len(wanted):
        return '%s must be pinned together; the pin set has only %s' % (
            ', '.join(wanted), ', '.join('%s %s' % item for item in present))
    if len(set(split_local(version)[0] for _name, version in present)) > 1:
        return '%s must carry the same version; the pin set has %s' % (
            ' and '.join(wanted), ', '.join('%s %s' % item for item in present))
    return None


def _requires(rule, pins):
    name, pattern = rule.get('package') or '', rule.get('version') or '*'
    pinned = pins.get(normalize_name(name))
    if pinned is None or (pattern != '*' and not version_matches(pinned, pattern)):
        return None
    needs = rule.get('needs') or {}
    other_name, other_pattern = needs.get('package') or '', needs.get('version') or '*'
    other = pins.get(normalize_name(other_name))
    if other is not None and (other_pattern == '*' or version_matches(other, other_pattern)):
        return None
    found = 'no %s' % other_name if other is None else '%s %s' % (other_name, other)
    return '%s %s needs %s %s; the pin set has %s' % (name, pinned, other_name, other_pattern, found)


def _newer_than(rule, versions, source):
    """``versions``: {normalised name: [versions]}; a universal lock holds a name once per marker."""
    floor = rule.get('version')
    old = [(name, version) for name in rule.get('packages') or []
           for version in versions.get(normalize_name(name), []) if not version_newer(version, floor)]
    if not old:
        return None
    names = []
    for name, dummy in old:
        if name not in names:
            names.append(name)
    return '%s must be newer than %s; %s has %s' % (
        ' and '.join(names), floor, source, ', '.join('%s %s' % item for item in old))


def _cuda_local_tag(rule, pins, cuda_version):
    major = cuda_major(cuda_version)
    wrong = ['%s %s' % (name, version) for name, version in sorted(pins.items())
             if cuda_major_of_tag(version) not in (None, major)]
    if wrong:
        return 'the CUDA toolkit is %s (major %s) but %s built for another CUDA major' % (
            cuda_version, major, ', '.join(wrong) + (' is' if len(wrong) == 1 else ' are'))
    return None


def _cuda_major(rule, cuda_version):
    if cuda_major(rule.get('major')) != cuda_major(cuda_version):
        return 'the stack targets CUDA %s but the toolkit is %s' % (rule.get('major'), cuda_version)
    return None


def _python_version(rule, python_version):
    allowed = [str(item) for item in rule.get('versions') or []]
    major_minor = '.'.join(str(python_version).split('.')[:2])
    if major_minor not in allowed:
        return 'Python %s is not supported by this stack (allowed: %s)' % (python_version, ', '.join(allowed))
    return None


def _evaluate(rule, pins, cuda_version, python_version):
    kind = rule['kind']
    if kind == 'same_version':
        return _same_version(rule, pins)
    if kind == 'requires':
        return _requires(rule, pins)
    if kind == 'cuda_local_tag':
        return _cuda_local_tag(rule, pins, cuda_version) if cuda_version else None
    if kind == 'cuda_major':
        return _cuda_major(rule, cuda_version) if cuda_version else None
    if kind == 'newer_than':
        return _newer_than(rule, dict((normalize_name(name), [version]) for name, version in pins.items()), 'the pin set')
    return _python_version(rule, python_version)


def evaluate_rules(rules, pins, cuda_version=None, python_version=None):
    """One result per rule: name, kind, ok and the message of a failed rule."""
    pins = dict((normalize_name(name), str(version)) for name, version in pins.items())
    results = []
    for rule in rules:
        message = rule_problem(rule)
        if message is None:
            message = _evaluate(rule, pins, cuda_version, python_version)
        results.append(_rule_result(rule, message))
    return results


def floor_results(rules, versions, source):
    """The newer_than rules of ``rules`` over ``versions`` ({name: [versions]}, a lock's; ``source`` names
    it in a failure), as evaluate_rules reports them. The other kinds judge the pins, which a lock holds
    exactly (ml_env_lock.lock_problems); a floor also holds for what the pins brought with them."""
    versions = dict((normalize_name(name), [str(item) for item in listed]) for name, listed in versions.items())
    results = []
    for rule in rules:
        if rule.get('kind') == 'newer_than':
            results.append(_rule_result(rule, rule_problem(rule) or _newer_than(rule, versions, source)))
    return results
