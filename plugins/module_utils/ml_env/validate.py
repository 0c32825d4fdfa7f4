# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ml_env role's input checks (input_checks.py says how they are shaped).

What only the host shows comes from roles/ml_env/tasks/validate.yml as probes: the stat of the
interpreter, of ml_env_path, of the uv given and of the CA bundle, the interpreter's answer, and the
profile's lock as read on the controller. A probe that is absent or skipped gives no verdict.
The compatibility rules are evaluated here as ml_env_check's precheck evaluates them
(module_utils/ml_env/stack.py), the interpreter's version taken from its probe. The newer_than rules
(version floors) also judge what the precheck does not see: the profile's overrides and its lock.
"""

from __future__ import annotations

import json
import posixpath
import re

from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import (
    os_family_check,
    CONTROL,
    DIGITS,
    MISSING,
    as_bool,
    check,
    is_absolute_path,
    is_bool,
    is_int,
    is_list,
    is_mapping,
    is_string,
    problem,
)
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.lock import lock_packages, lock_problems, same_version
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.stack import (
    CUDA_VERSION_RE,
    NAME_RE,
    RELEASE_RE,
    RULE_KINDS,
    VERSION_RE,
    cuda_major,
    cuda_major_of_tag,
    evaluate_rules,
    floor_results,
    normalize_name,
    split_local,
    version_matches,
)
from ansible_collections.inferops.gpu.plugins.module_utils._common.network_input import INDEX_URL, RETIRED, network_problems

# What ml_env_check compares a version with: *, a release prefix (2.9.*) or an exact version.
VERSION_PATTERN = re.compile(
    r'^(\*|[0-9]+(\.[0-9]+)*\.\*|([0-9]+!)?[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?(\+[a-z0-9]+(\.[a-z0-9]+)*)?)\Z',
    re.IGNORECASE)
IMPORT_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z')
ATTRIBUTE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*\Z')
PYTHON_MM = re.compile(r'^[0-9]+\.[0-9]+\Z')
URL = INDEX_URL
# A site file's path climbing out of site-packages.
PARENT = re.compile(r'(^|/)\.\.(/|\Z)')

URL_ALLOWED = 'empty, or an http(s):// or file:// URL'
PIN_ALLOWED = ("a distribution name (letters, digits, '.', '_', '-') mapped to one exact PEP 440 version like 2.9.1 or "
               "2.9.1+cu130 (no ranges, no wildcards)")
IMPORT_ALLOWED = ('each import is {name: an import name like sgl_kernel, version: optional, a version (0.3.21, '
                  '2.9.1+cu130) or a release prefix (2.9.*), attribute: optional, the module attribute holding the '
                  'version (default __version__)}')
RULE_VALUES_ALLOWED = ('packages two or more distribution names (newer_than: one or more); package a distribution '
                       'name; version a version (0.3.21, 2.9.1+cu130), a release prefix (2.9.*) or * (newer_than: a '
                       'release like 2.26.2); needs {package: a distribution name, version: like version}; major a CUDA '
                       'major like 13; versions Python versions like 3.12; require_all true or false')

NAMES = (
    'ml_env_profile',
    'ml_env_profiles',
    'ml_env_extra_packages',
    'ml_env_keep_releases',
    'ml_env_rollback',
    'ml_env_command_timeout',
    'ml_env_root',
    'ml_env_path',
    'ml_env_python_interpreter',
    'cuda_toolkit_version_installed',
    'ml_env_cuda_version',
    'ml_env_uv_version',
    'ml_env_uv_path',
    'ml_env_extra_site_dirs',
    'ml_env_index_url',
    'ml_env_extra_index_urls',
    'ml_env_find_links',
    'ml_env_extension_globs',
    'ml_env_site_files',
    '__ml_env_builtin_profiles',
    '__ml_env_profile_keys',
    '__ml_env_index_strategies',
    '__ml_env_rules',
    '__ml_env_rule_fields',
    '__ml_env_proxy',
    '__ml_env_ca_bundle',
    '__ml_env_os_family',
    '__ml_env_os_families',
    # lock.yml's validation: the lock that is missing or stale is what it makes.
    '__ml_env_making_lock',
    'inventory_hostname',
) + tuple(sorted(RETIRED))


def _host(values):
    host = values.get('inventory_hostname')
    return host if is_string(host) else 'the host'


def _verdict(probes, name):
    """The registered result of a probe that ran, else None (absent or skipped: no verdict)."""
    result = probes.get(name)
    if not is_mapping(result) or result.get('skipped'):
        return None
    return result


def _profile(values):
    """(the profile's variable name, the profile, every profile); (None, None, every profile) when ml_env_profile
    names none."""
    name = values['ml_env_profile']
    builtin, user = values['__ml_env_builtin_profiles'], values['ml_env_profiles']
    profiles = dict(builtin if is_mapping(builtin) else {})
    profiles.update(user if is_mapping(user) else {})
    if not is_string(name) or name not in profiles:
        return None, None, profiles
    return 'ml_env_profiles[%s]' % json.dumps(name), profiles[name], profiles


def _known_profile(values):
    pvar, profile, dummy = _profile(values)
    return (pvar, profile) if is_mapping(profile) else (None, None)


def _cuda(values):
    """(variable, value) of the CUDA version: cuda_toolkit's fact once it ran, before that the one asked for."""
    installed = values['cuda_toolkit_version_installed']
    if installed is not MISSING and installed not in ('', None):
        return 'cuda_toolkit_version_installed', str(installed)
    asked = values['ml_env_cuda_version']
    return 'ml_env_cuda_version', (asked if asked is MISSING else str(asked))


def _is_url(value):
    return is_string(value) and bool(URL.match(value))


def _is_find_link(value):
    return _is_url(value) or is_absolute_path(value)


def _is_version(value, pattern=VERSION_RE):
    return not is_mapping(value) and not is_list(value) and not isinstance(value, bool) and bool(pattern.match(str(value)))


def _bool_like(value):
    """What `| bool` reads as a boolean: true, "yes", 1 ..."""
    return not is_mapping(value) and not is_list(value) and is_bool(str(value))


check_os_family = os_family_check('ml_env')


def check_profile(values, probes):
    pvar, profile, profiles = _profile(values)
    names = ', '.join(sorted(map(str, profiles)))
    if pvar is None:
        return [problem('ml_env_profile', values['ml_env_profile'],
                        'the name of a profile (a mapping), built-in or from ml_env_profiles: %s' % names)]
    if not is_mapping(profile):
        return [problem(pvar, profile, 'a mapping (a profile: %s)' % ', '.join(values['__ml_env_profile_keys']))]
    return []


def check_profile_keys(values, probes):
    pvar, profile = _known_profile(values)
    keys = values['__ml_env_profile_keys'] or []
    if pvar is None:
        return []
    return [problem('%s.%s' % (pvar, key), profile[key], 'not a key of a profile (allowed: %s)' % ', '.join(keys))
            for key in sorted(profile, key=str) if key not in keys]


def check_profile_values(values, probes):
    pvar, profile = _known_profile(values)
    if pvar is None:
        return []
    strategies = values['__ml_env_index_strategies'] or []
    rules = {
        'description': (is_string, 'text'),
        'cuda_major': (is_int, 'a CUDA major like 13'),
        'packages': (is_mapping, 'a mapping of distribution names to exact versions'),
        'overrides': (is_mapping, 'a mapping of distribution names to exact versions'),
        'index_url': (lambda v: v == '' or _is_url(v), URL_ALLOWED),
        'extra_index_urls': (lambda v: is_list(v) and all(map(_is_url, v)), 'a list of http(s):// or file:// URLs'),
        'find_links': (lambda v: is_list(v) and all(map(_is_find_link, v)),
                       'a list of absolute paths or http(s):// or file:// URLs'),
        'index_strategy': (lambda v: is_string(v) and v in strategies,
                           "one of uv's index strategies: %s" % ', '.join(strategies)),
        'imports': (is_list, 'a list of {name, version, attribute}'),
        'rules': (is_list, 'a list of rules'),
        'system_site_packages': (_bool_like, 'true or false'),
        'extension_globs': (lambda v: is_list(v) and not any(CONTROL.search(str(glob)) for glob in v),
                            'a list of globs, relative to the venv\'s sys.path or absolute'),
        # false: no lock, on purpose (the demo's stand-in is built from the checkout, so no lock can hold its hash).
        'lock': (lambda v: v is False or (is_string(v) and v != '' and not CONTROL.search(v)),
                 'the path of a lock file on the controller, or false (no lock, on purpose: each node resolves)'),
    }
    found = []
    for key in sorted(profile, key=str):
        if key in rules:
            ok, allowed = rules[key]
            if check(key, profile, ok, allowed):  # [] when it holds
                found.append(problem('%s.%s' % (pvar, key), profile[key], allowed))
    return found


def _pin_sets(values, pvar, profile):
    """(variable, its pins) of the profile's packages and overrides and ml_env_extra_packages."""
    sets = []
    for key in ('packages', 'overrides'):
        pins = profile.get(key) or {}
        if is_mapping(pins):
            sets.append(('%s.%s' % (pvar, key), pins))
    extra = values['ml_env_extra_packages']
    sets.append(('ml_env_extra_packages', extra if is_mapping(extra) else {}))
    return sets


def _pin_messages(values, pvar, profile):
    found = []
    for var, pins in _pin_sets(values, pvar, profile):
        for name, version in pins.items():
            if not (is_string(name) and NAME_RE.match(name) and _is_version(version)):
                found.append(problem('%s[%s]' % (var, json.dumps(name)), version, PIN_ALLOWED))
    return found


def check_pins(values, probes):
    pvar, profile = _known_profile(values)
    return [] if pvar is None else _pin_messages(values, pvar, profile)


def _is_pin(name, version):
    """A well-formed pin (check_pins names the others)."""
    return is_string(name) and bool(NAME_RE.match(name)) and _is_version(version)


def _spelled(name, other, normal):
    return '%s and %s are one name as PEP 503 compares names (%s)' % (json.dumps(name), json.dumps(other), normal)


def check_pin_names(values, probes):
    """One distribution, one pin. Names compare as PEP 503 names (torch and Torch, flashinfer_python and
    flashinfer-python, a.b and a-b are one), but the role merges the profile's packages and overrides and
    ml_env_extra_packages by the name as written: two spellings reach uv as two requirements. So a mapping names
    a distribution once, and an override spelled otherwise than the pin or the extra pin it meets carries the same
    version. An extra pin of a distribution the profile pins is check_extra_pins'."""
    pvar, profile = _known_profile(values)
    if pvar is None:
        return []
    found, first = [], {}  # normal name: (variable, name, version) where the mappings name it first
    for var, pins in _pin_sets(values, pvar, profile):
        own = {}
        for name, version in pins.items():
            if not _is_pin(name, version):
                continue
            normal, at = normalize_name(name), '%s[%s]' % (var, json.dumps(name))
            if normal in own:
                found.append(problem(at, version, 'one pin per distribution: %s, and %s[%s] pins it already'
                                     % (_spelled(name, own[normal], normal), var, json.dumps(own[normal]))))
                continue
            own[normal] = name
            if normal not in first:
                first[normal] = (var, name, version)
                continue
            seen_var, seen_name, seen_version = first[normal]
            if seen_name == name or same_version(version, seen_version) or (
                    var == 'ml_env_extra_packages' and seen_var.endswith('.packages')):
                continue  # merged into one pin, or the same pin twice; an extra of a pinned one: check_extra_pins
            if var == 'ml_env_extra_packages':
                allowed = ("the version of the profile's override, %s (%s[%s]), or its spelling, %s, which replaces that "
                           "override: %s; spelled two ways, uv would get both" % (
                               seen_version, seen_var, json.dumps(seen_name), json.dumps(seen_name),
                               _spelled(name, seen_name, normal)))
            else:
                allowed = ("the version the profile pins it at, %s (%s[%s]): %s; spelled two ways, uv would get both" % (
                    seen_version, seen_var, json.dumps(seen_name), _spelled(name, seen_name, normal)))
            found.append(problem(at, version, allowed))
    return found


def _import_accepts(pin, expected):
    """Can a distribution pinned at ``pin`` report the version an import expects (ml_env_check's patterns: *,
    2.9.*, 0.3.21, 2.9.1+cu130)? A pin without a local label may report one its metadata does not carry (PyPI's
    torch 2.14.1 reports 2.14.1+cu130): then only the public version is compared."""
    expected = str(expected)
    if expected == '*':
        return True
    if not split_local(pin)[1]:
        expected = split_local(expected)[0]
    return version_matches(str(pin), expected)


def check_extra_pins(values, probes):
    """ml_env_extra_packages adds pins beside the profile's, it does not move them: a distribution the profile
    pins keeps the profile's version (the same pin again is fine), and one whose version the profile's imports
    expect, a version they accept. Else verification fails after the build; names compare as PEP 503 names."""
    pvar, profile = _known_profile(values)
    extra = values['ml_env_extra_packages']
    if pvar is None or not is_mapping(extra):
        return []
    packages = profile.get('packages') if is_mapping(profile.get('packages')) else {}
    pinned = {}
    for name, version in packages.items():
        if _is_pin(name, version):
            pinned.setdefault(normalize_name(name), (name, version))
    imports = profile.get('imports') if is_list(profile.get('imports')) else []
    expected = {}
    for index, entry in enumerate(imports):
        if (is_mapping(entry) and is_string(entry.get('name')) and IMPORT_NAME.match(entry['name'])
                and 'version' in entry and _is_version(entry['version'], VERSION_PATTERN)):
            expected.setdefault(normalize_name(entry['name']), (index, entry))
    found = []
    for name, version in extra.items():
        if not _is_pin(name, version):
            continue
        normal, at = normalize_name(name), 'ml_env_extra_packages[%s]' % json.dumps(name)
        if normal in pinned:
            own_name, own_version = pinned[normal]
            if not same_version(version, own_version):
                found.append(problem(at, version, "the profile's own version of %s, %s (%s.packages[%s]), or a distribution "
                                     "the profile does not pin: extra pins add to the profile's, they do not move them (to "
                                     "move one, make a profile in ml_env_profiles); names compare as PEP 503 names"
                                     % (normal, own_version, pvar, json.dumps(own_name))))
        elif normal in expected:
            index, entry = expected[normal]
            if not _import_accepts(version, entry['version']):
                found.append(problem(at, version, "a version the profile's import check accepts: %s.imports[%d] expects %s "
                                     "%s; names compare as PEP 503 names" % (pvar, index, entry['name'], entry['version'])))
    return found


def check_imports(values, probes):
    pvar, profile = _known_profile(values)
    imports = profile.get('imports') if pvar else None
    if not is_list(imports):
        return []
    found = []
    for index, entry in enumerate(imports):
        ok = (is_mapping(entry) and not set(entry) - {'name', 'version', 'attribute'}
              and is_string(entry.get('name')) and IMPORT_NAME.match(entry['name'])
              and ('version' not in entry or _is_version(entry['version'], VERSION_PATTERN))
              and ('attribute' not in entry or bool(ATTRIBUTE.match(str(entry['attribute'])))))
        if not ok:
            found.append(problem('%s.imports[%d]' % (pvar, index), entry, IMPORT_ALLOWED))
    return found


def _bad_rule_fields(rule):
    """The names of the rule's fields that are not well formed."""
    def names_ok(names, least):
        return is_list(names) and len(names) >= least and all(is_string(n) and NAME_RE.match(n) for n in names)

    # A floor is one release (2.26.2), which can be on one package.
    floor = rule.get('kind') == 'newer_than'
    ok = {
        'packages': lambda v: names_ok(v, 1 if floor else 2),
        'package': lambda v: is_string(v) and bool(NAME_RE.match(v)),
        'version': lambda v: _is_version(v, RELEASE_RE if floor else VERSION_PATTERN),
        'needs': lambda v: (is_mapping(v) and not set(v) - {'package', 'version'} and is_string(v.get('package', ''))
                            and bool(NAME_RE.match(v.get('package', ''))) and _is_version(v.get('version', ''), VERSION_PATTERN)),
        'major': lambda v: not is_mapping(v) and not is_list(v) and bool(DIGITS.match(str(v))),
        'versions': lambda v: is_list(v) and all(not is_mapping(i) and PYTHON_MM.match(str(i)) for i in v),
        'require_all': _bool_like,
    }
    return [field for field in ok if field in rule and not ok[field](rule[field])]


def _rule_sets(values, pvar, profile):
    rules = [('__ml_env_rules', values['__ml_env_rules'])]
    if pvar is not None:
        rules.append(('%s.rules' % pvar, profile.get('rules') or []))
    return [(where, entries) for where, entries in rules if is_list(entries)]


def _rule_messages(values, pvar, profile):
    fields_of = values['__ml_env_rule_fields'] or {}
    found = []
    for where, rules in _rule_sets(values, pvar, profile):
        for index, rule in enumerate(rules):
            at = '%s[%d]' % (where, index)
            if not (is_mapping(rule) and is_string(rule.get('name')) and rule['name']
                    and is_string(rule.get('kind')) and rule['kind'] in fields_of):
                found.append(problem(at, rule, 'a rule is a mapping with a name and a kind, one of %s'
                                     % ', '.join(kind for kind in RULE_KINDS if kind in fields_of)))
                continue
            kind = rule['kind']
            required, optional = fields_of[kind].get('required', []), fields_of[kind].get('optional', [])
            described = 'rule %s of kind %s' % (json.dumps(rule['name']), kind)
            kind_allowed = 'a %s rule has %s' % (kind, ', '.join(
                ['name', 'kind'] + ['%s (required)' % field for field in required] + optional + ['why']))
            missing = [field for field in required if not rule.get(field)]
            extra = sorted(set(rule) - set(['name', 'kind', 'why'] + required + optional), key=str)
            bad = _bad_rule_fields(rule)
            if missing:
                found.append(problem(at, rule, '%s is missing %s; %s' % (described, ', '.join(missing), kind_allowed)))
            elif extra:
                found.append(problem(at, rule, '%s has fields of other kinds: %s; %s'
                                     % (described, ', '.join(map(str, extra)), kind_allowed)))
            elif bad:
                found.append(problem(at, rule, '%s has a bad %s; allowed: %s' % (described, ', '.join(bad), RULE_VALUES_ALLOWED)))
    return found


def check_rules(values, probes):
    pvar, profile = _known_profile(values)
    return _rule_messages(values, pvar, profile)


def _python_version(probes):
    """The interpreter's major.minor when its probe ran it as Python 3, else None."""
    run = _verdict(probes, 'python_run')
    answer = str((run or {}).get('stdout', '')).strip()
    if run and run.get('rc') == 0 and PYTHON_MM.match(answer) and answer.startswith('3.'):
        return answer
    return None


def check_rule_verdicts(values, probes):
    """The rules over the pin set, the CUDA version and the interpreter, as ml_env_check's precheck judges them."""
    pvar, profile = _known_profile(values)
    cuda_var, cuda_version = _cuda(values)
    if (pvar is None or not is_mapping(profile.get('packages') or {}) or _pin_messages(values, pvar, profile)
            or _rule_messages(values, pvar, profile) or not is_string(cuda_version) or not CUDA_VERSION_RE.match(cuda_version)
            or ('cuda_major' in profile and not is_int(profile['cuda_major']))):
        return []  # the checks above name what is wrong
    extra = values['ml_env_extra_packages'] if is_mapping(values['ml_env_extra_packages']) else {}
    packages = profile.get('packages') or {}
    pins = dict(packages)
    pins.update(extra)
    rules = list(values['__ml_env_rules'] or []) + list(profile.get('rules') or [])
    if 'cuda_major' in profile:
        rules.append({'name': 'profile-cuda-major-matches-toolkit', 'kind': 'cuda_major', 'major': str(profile['cuda_major'])})
    python = _python_version(probes)
    if python is None:
        # No answer yet, or no Python 3 (check_python_interpreter names it): no verdict on its version.
        rules = [rule for rule in rules if rule['kind'] != 'python_version']
    by_name = dict((rule['name'], rule) for rule in rules)
    normal_extra = set(normalize_name(str(name)) for name in extra)
    found = []
    for result in evaluate_rules(rules, pins, cuda_version, python):
        if result['ok']:
            continue
        rule = by_name[result['name']]
        if rule['kind'] == 'python_version':
            name, value = 'ml_env_python_interpreter', values['ml_env_python_interpreter']
        elif rule['kind'] == 'cuda_major':
            name, value = cuda_var, cuda_version
        else:
            if rule['kind'] in ('same_version', 'newer_than'):
                involved = rule['packages']
            elif rule['kind'] == 'requires':
                involved = [rule['package'], rule['needs']['package']]
            else:
                involved = [pin for pin, version in pins.items() if cuda_major_of_tag(str(version)) not in (None, cuda_major(cuda_version))]
            from_extra = normal_extra & set(normalize_name(str(pin)) for pin in involved)
            name, value = ('ml_env_extra_packages', extra) if from_extra else ('%s.packages' % pvar, packages)
        found.append(problem(name, value, 'rule %s failed: %s' % (result['name'], result['message'])))
    # An override no pin replaces installs that version of a package the pins bring (nvidia-nccl-cu12 with
    # torch): the floors judge it too. The precheck is given the pins only.
    overrides = profile.get('overrides') if is_mapping(profile.get('overrides')) else {}
    pinned = set(normalize_name(str(pin)) for pin in pins)
    forced = dict((name, [version]) for name, version in overrides.items() if normalize_name(str(name)) not in pinned)
    return found + _floor_messages(rules, forced, 'the override set', '%s.overrides' % pvar, overrides)


def _floor_messages(rules, versions, source, name, value):
    return [problem(name, value, 'rule %s failed: %s' % (result['name'], result['message']))
            for result in floor_results(rules, versions, source) if not result['ok']]


def check_lock(values, probes):
    """The profile's lock, read on the controller: there, holding exactly the pins, and what the pins brought
    (NCCL comes with torch) above the floors of the newer_than rules."""
    pvar, profile = _known_profile(values)
    read = _verdict(probes, 'lock')
    if pvar is None or read is None or as_bool(values['__ml_env_making_lock'] or False):
        return []
    where = profile.get('lock')
    if not is_string(where) or not where or CONTROL.search(where):
        return []  # no lock, or check_profile_values names it
    if not read.get('content'):
        return [problem('%s.lock' % pvar, where, 'a readable, non-empty file on the controller (make it: make lock '
                        'PROFILE=%s, or playbooks/lock.yml)' % values['ml_env_profile'])]
    pins = dict(profile.get('packages') or {})
    pins.update(values['ml_env_extra_packages'] if is_mapping(values['ml_env_extra_packages']) else {})
    found = [problem('%s.lock' % pvar, where, 'a lock of exactly the pins, every requirement with a hash (%s)' % found)
             for found in lock_problems(read['content'], pins=pins, where=where)]
    if _rule_messages(values, pvar, profile):
        return found  # check_rules names the rules that cannot be evaluated
    rules = [rule for dummy, entries in _rule_sets(values, pvar, profile) for rule in entries]
    return found + _floor_messages(rules, lock_packages(read['content']), where, '%s.lock' % pvar, where)


def check_keep_releases(values, probes):
    return check('ml_env_keep_releases', values, lambda v: is_int(v, 1), 'keep at least 1 release (the current one)')


def check_rollback(values, probes):
    """ml_env_rollback switches to the release `previous` names: there must be one, verified."""
    if not is_bool(values['ml_env_rollback']) or not as_bool(values['ml_env_rollback']):
        return []
    found = _verdict(probes, 'previous')
    stat = found.get('stat') if found else None
    if not is_mapping(stat) or stat.get('exists'):
        return []
    return [problem('ml_env_rollback', values['ml_env_rollback'],
                    'true only on a host with a verified previous release (%s/previous, set when a release replaced '
                    'another); %s has none, so there is nothing to switch back to' % (values['ml_env_root'], _host(values)))]


def check_command_timeout(values, probes):
    return check('ml_env_command_timeout', values, lambda v: is_int(v, 1), 'a whole number of seconds, at least 1')


def _normal(path):
    return posixpath.normpath(path).rstrip('/') + '/'


def check_root(values, probes):
    return check('ml_env_root', values, lambda v: is_absolute_path(v) and _normal(v) != '/', 'an absolute path other than /')


def check_path(values, probes):
    root = values['ml_env_root']
    # A bad root is check_root's to name: nothing is inside or outside it.
    root = _normal(root) if is_absolute_path(root) and _normal(root) != '/' else None

    def outside(path):
        return root is None or not (_normal(path).startswith(root) or root.startswith(_normal(path)))

    found = check('ml_env_path', values, lambda v: is_absolute_path(v) and outside(v), 'an absolute path outside ml_env_root')
    stat = (_verdict(probes, 'path_stat') or {}).get('stat') or {}
    if not found and stat.get('exists') and not stat.get('islnk'):
        found.append(problem('ml_env_path', values['ml_env_path'], 'it exists on %s and is not a symlink (a venv built by '
                             'hand?); move it away: the role only replaces a link to a release' % _host(values)))
    return found


def check_python_interpreter(values, probes):
    found = check('ml_env_python_interpreter', values, is_absolute_path, 'an absolute path')
    stat = _verdict(probes, 'python_stat')
    if found or stat is None:
        return found
    stat, run = stat.get('stat') or {}, _verdict(probes, 'python_run')
    if not stat.get('exists'):
        why = 'does not exist'
    elif not (stat.get('isreg') and stat.get('executable')):
        why = 'is not an executable file'
    elif run is None or _python_version(probes):
        return []  # no answer yet, or a Python 3
    else:
        stderr = str(run.get('stderr') or '').splitlines()[-1:]
        printed = str(run.get('stdout') or '')
        why = 'did not run as Python 3 (rc=%s): %s' % (run.get('rc'), stderr[0] if stderr else 'it printed %s' % json.dumps(
            printed if len(printed) <= 80 else printed[:77] + '...'))
    return [problem('ml_env_python_interpreter', values['ml_env_python_interpreter'],
                    'an executable Python 3 with the venv module on %s; this one %s' % (_host(values), why))]


def check_cuda_version(values, probes):
    name, value = _cuda(values)
    return check(name, {name: value}, lambda v: bool(CUDA_VERSION_RE.match(v)), 'a CUDA version like 13.0')


def check_uv_version(values, probes):
    return check('ml_env_uv_version', values, _is_version, 'an exact version like 0.13.9')


def check_uv_path(values, probes):
    found = check('ml_env_uv_path', values, lambda v: v == '' or is_absolute_path(v),
                  'empty, or the absolute path of a uv executable')
    stat = _verdict(probes, 'uv_stat')
    if found or stat is None or values['ml_env_uv_path'] == '':
        return found
    stat = stat.get('stat') or {}
    if not (stat.get('executable') and not stat.get('isdir')):
        return [problem('ml_env_uv_path', values['ml_env_uv_path'], 'an executable uv on %s' % _host(values))]
    return []


def check_sys_path(values, probes):
    """What the venv's sys.path gets besides its own (ml_env_extra_site_dirs) and the globs the ABI check
    looks for on it (ml_env_extension_globs)."""
    return (check('ml_env_extra_site_dirs', values, lambda v: is_list(v) and all(map(is_absolute_path, v)), 'absolute paths')
            + check('ml_env_extension_globs', values, lambda v: is_list(v) and not any(CONTROL.search(str(glob)) for glob in v),
                    'globs without control characters'))


def check_index_url(values, probes):
    return check('ml_env_index_url', values, lambda v: v == '' or _is_url(v), URL_ALLOWED)


def check_extra_index_urls(values, probes):
    return check('ml_env_extra_index_urls', values, lambda v: is_list(v) and all(map(_is_url, v)), 'http(s):// or file:// URLs')


def check_find_links(values, probes):
    return check('ml_env_find_links', values, lambda v: is_list(v) and all(map(_is_find_link, v)),
                 'absolute paths or http(s):// or file:// URLs')


def check_site_files(values, probes):
    files = values['ml_env_site_files']
    found = []
    for index, entry in enumerate(files if is_list(files) else []):
        path = entry.get('path') if is_mapping(entry) else None
        if not is_string(path) or path == '' or path.startswith('/') or PARENT.search(path) or CONTROL.search(path):
            found.append(problem('ml_env_site_files[%d].path' % index, path,
                                 "a path relative to the release's site-packages, without '..' or control characters"))
    return found


def check_network(values, probes):
    """inferops_proxy and inferops_ca_bundle (network_input.py, shared by every role that downloads), and the
    retired variables they replaced; then the CA bundle's stat on the host."""
    retired = [name for name in sorted(RETIRED) if values.get(name, MISSING) is not MISSING]
    ca_bundle = values['__ml_env_ca_bundle']
    found = network_problems(values['__ml_env_proxy'], ca_bundle=ca_bundle, retired=retired)
    stat = _verdict(probes, 'ca_bundle')
    if found or stat is None or not ca_bundle:
        return found
    stat = stat.get('stat') or {}
    if not stat.get('isreg'):
        found.append(problem('inferops_ca_bundle', ca_bundle, 'a file on %s (this path %s)' % (
            _host(values), 'is not a regular file' if stat.get('exists') else 'does not exist')))
    return found


CHECKS = (
    check_os_family,
    check_profile,
    check_profile_keys,
    check_profile_values,
    check_pins,
    check_pin_names,
    check_extra_pins,
    check_imports,
    check_rules,
    check_rule_verdicts,
    check_lock,
    check_keep_releases,
    check_rollback,
    check_command_timeout,
    check_root,
    check_path,
    check_python_interpreter,
    check_cuda_version,
    check_uv_version,
    check_uv_path,
    check_sys_path,
    check_index_url,
    check_extra_index_urls,
    check_find_links,
    check_site_files,
    check_network,
)
