# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runtime_env role's input checks (input_checks.py says how they are shaped).

Every input that needs neither another role's facts nor a GPU: names, paths, choices, every NCCL
profile (built-in and the operator's, used or not), the topology map, the extra variables and PATH
entries. The profile `auto` picks depends on the host's topology: tasks/spec.yml checks only that
the chosen one exists (every profile it can choose from was checked here). A host of another OS
family is refused by check_os_family (the bad-input table stands a Red Hat host in through
__runtime_env_os_family).

The dynamic loader's variables reach every program started in this environment (login shells
included), so they have rules of their own wherever they are set (LOADER_FILES, LOADER_DIRS,
LOADER_DIAGNOSTICS; issue 41): LD_PRELOAD and LD_AUDIT name absolute paths of shared objects,
LD_LIBRARY_PATH absolute directories (an empty or relative entry is searched from each program's
current directory), and the loader's diagnostics, which make every program print (or, traced, not
run), are refused. check_loader_files judges runtime_env_extra_vars' LD_PRELOAD and LD_AUDIT files
against the host: one probe (tasks/validate.yml, inferops.gpu.host_probe) stats each absolute entry,
as probes['loader_files'] keyed by its path, and runtime_env_venv as probes['venv']. A file must be
a regular file (after links); a missing one under a venv that does not exist yet gets no verdict (the
ml_env role makes it later in the run, and this role's own validate, its first step, judges it then);
no probe, no verdict. A profile's loader variables get the rules of form only: which profile applies
is known when the role runs.
"""

from __future__ import annotations

import re

from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import (
    ADOPT, check_adopt, os_family_check,
    CONTROL, MISSING, check, is_absolute_path, is_bool, is_list, is_mapping, is_secret, problem,
)

# Patterns end in \Z, not $: $ also matches before a final newline.
VAR_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*\Z')
VAR_NAME_ALLOWED = 'a name matching [A-Za-z_][A-Za-z0-9_]*'
# runtime_env_name and profile names: no / and no leading dot, so never .. either.
PLAIN_NAME = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_.-]*\Z')
NAME_MAX = 200
# systemd's PATH tail: absolute directories joined by ':', in characters a unit file takes as they are.
SYSTEMD_PATH = re.compile(r'^/[-A-Za-z0-9_.+@/]*(:/[-A-Za-z0-9_.+@/]*)*\Z')

# The values NCCL accepts (it reads them case-insensitively) for the variables the role knows.
_ALGOS = 'ring|tree|collnetdirect|collnetchain|nvls|nvlstree|pat'
_PROTOS = 'll|ll128|simple'
_POSITIVE = (r'^[1-9][0-9]*\Z', 'a positive integer')
RULES = dict((name, (re.compile(pattern, re.IGNORECASE), allowed)) for name, (pattern, allowed) in {
    'NCCL_PROTO': (r'^\^?(%s)(,(%s))*\Z' % (_PROTOS, _PROTOS),
                   'a comma list of LL, LL128, Simple, optionally starting with ^ (exclude), any case'),
    'NCCL_ALGO': (r'^\^?(%s)(,(%s))*\Z' % (_ALGOS, _ALGOS),
                  'a comma list of Ring, Tree, CollnetDirect, CollnetChain, NVLS, NVLSTree, PAT, optionally starting '
                  'with ^, any case'),
    'NCCL_P2P_LEVEL': (r'^(loc|nvl|pix|pxb|phb|sys|[0-9]+)\Z', 'one of LOC, NVL, PIX, PXB, PHB, SYS or a non-negative integer'),
    'NCCL_MAX_NCHANNELS': _POSITIVE,
    'NCCL_MIN_NCHANNELS': _POSITIVE,
    'NCCL_BUFFSIZE': (r'^[1-9][0-9]*\Z', 'a positive integer (bytes)'),
    'NCCL_NTHREADS': (r'^(64|128|256|512)\Z', "one of 64, 128, 256, 512 (NCCL's documented values)"),
}.items())

# The dynamic loader's variables (ld.so(8)). Files: absolute paths of shared objects, split as the
# loader splits them (LD_PRELOAD on spaces and ':', LD_AUDIT on ':'; empty entries are skipped), with
# no $ORIGIN, $LIB or $PLATFORM (the host probe stats the path as written). Directories: split on ':'
# and ';', where an empty entry is the current directory.
LOADER_FILES = {'LD_PRELOAD': re.compile(r'[ :]'), 'LD_AUDIT': re.compile(r':')}
LOADER_DIRS = {'LD_LIBRARY_PATH': re.compile(r'[:;]')}
LOADER_FILES_ALLOWED = {
    'LD_PRELOAD': "absolute paths of shared objects separated by spaces or ':' (not a bare name, which the loader "
                  "searches for; no $ORIGIN, $LIB or $PLATFORM)",
    'LD_AUDIT': "absolute paths of shared objects separated by ':' (not a bare name, which the loader searches for; "
                "no spaces; no $ORIGIN, $LIB or $PLATFORM)",
}
LOADER_DIRS_ALLOWED = ("absolute directories separated by ':' (an empty or relative entry makes every program search "
                       "its current directory for its libraries)")
# The loader's diagnostics: every program started in this environment would print (LD_DEBUG,
# LD_SHOW_AUXV), write profiles (LD_PROFILE) or list its libraries instead of running (the traces).
LOADER_DIAGNOSTICS = ('LD_DEBUG', 'LD_PROFILE', 'LD_SHOW_AUXV', 'LD_TRACE_LOADED_OBJECTS', 'LD_TRACE_PRELINKING')

PROFILES, BUILTIN_PROFILES = 'runtime_env_nccl_profiles', '__runtime_env_nccl_profiles'
TOPOLOGY_MAP, BUILTIN_TOPOLOGY_MAP = 'runtime_env_nccl_profile_by_topology', '__runtime_env_topology_profiles'
EXTRA_VARS = 'runtime_env_extra_vars'
ARCH_PROFILES, BUILTIN_ARCH_PROFILES = 'runtime_env_arch_profiles', '__runtime_env_arch_profiles'
CAPABILITY = re.compile(r'^[0-9]+\.[0-9]+\Z')
ARCH = re.compile(r'^sm_[0-9]+[af]?\Z')

NAMES = (
    'runtime_env_name',
    'runtime_env_venv',
    'runtime_env_system_python',
    'runtime_env_adopt_backup_dir',
    'runtime_env_cuda_home',
    'runtime_env_ptxas',
    'runtime_env_ptxas_blackwell',
    'runtime_env_systemd_path',
    'runtime_env_topology',
    'runtime_env_nccl_profile',
    PROFILES,
    TOPOLOGY_MAP,
    EXTRA_VARS,
    'runtime_env_extra_path',
    BUILTIN_PROFILES,
    BUILTIN_TOPOLOGY_MAP,
    'runtime_env_compute_capability',
    ARCH_PROFILES,
    BUILTIN_ARCH_PROFILES,
    'runtime_env_verify_triton',
    'runtime_env_triton_archs',
    '__runtime_env_topologies',
    '__runtime_env_platform_vars',
    '__runtime_env_os_family',
    '__runtime_env_os_families',
    ADOPT,
)


def _secret_key(key):
    return isinstance(key, str) and is_secret(key)


def _entry(key, value):
    """{key: value} as a message shows one bad entry of a mapping; the values of secret names hidden."""
    if _secret_key(key):
        return {key: '(hidden)'}
    if is_mapping(value):
        return {key: dict((k, '(hidden)' if _secret_key(k) else v) for k, v in value.items())}
    return {key: value}


def _is_path_entry(value):
    """A directory that can go on PATH: absolute, on one line, without ':'."""
    return is_absolute_path(value) and ':' not in value


def _loader_entries(key, text):
    """The files of LD_PRELOAD / LD_AUDIT as the loader splits them, empty entries skipped."""
    return [entry for entry in LOADER_FILES[key].split(text) if entry]


def _loader_problem(name, key, value, secret):
    """The one problem of a loader variable's value (a string or a number on one line), or None."""
    text = str(value)
    if key in LOADER_DIAGNOSTICS:
        return problem(name, value, 'any variable but the loader\'s diagnostics (%s): every program started in this '
                       'environment would print, write profiles or, traced, list its libraries instead of running; '
                       'set them on one command' % ', '.join(LOADER_DIAGNOSTICS), secret)
    if key in LOADER_FILES:
        good = all(is_absolute_path(entry) and '$' not in entry for entry in _loader_entries(key, text)) \
            and not (key == 'LD_AUDIT' and ' ' in text)
        return None if good else problem(name, value, LOADER_FILES_ALLOWED[key], secret)
    if key in LOADER_DIRS and text != '':
        # An empty value sets no search path; an empty entry in one is the current directory.
        if not all(is_absolute_path(entry) for entry in LOADER_DIRS[key].split(text)):
            return problem(name, value, LOADER_DIRS_ALLOWED, secret)
    return None


def _profiles(values):
    """The merged profiles as vars/main.yml merges them (a user profile replaces a built-in whole),
    with where each comes from; None when a part is not a mapping (check_profiles says so)."""
    builtin, user = values[BUILTIN_PROFILES], values[PROFILES]
    if not (is_mapping(builtin) and is_mapping(user)):
        return None
    merged = dict((name, (BUILTIN_PROFILES, profile)) for name, profile in builtin.items())
    merged.update((name, (PROFILES, profile)) for name, profile in user.items())
    return merged


def _profile_choices(profiles):
    return ', '.join(sorted(str(name) for name in profiles)) + ' (define more in runtime_env_nccl_profiles)'


check_os_family = os_family_check('runtime_env')


def check_name(values, probes):
    # A path component: /etc/profile.d/<name>.sh.
    return check('runtime_env_name', values, lambda v: isinstance(v, str) and PLAIN_NAME.match(v) and len(v) <= NAME_MAX,
                 'a plain file name of at most %d characters (letters, digits, _ . -, not starting with . or -); '
                 'the script is /etc/profile.d/<name>.sh' % NAME_MAX)


def check_interpreter_paths(values, probes):
    allowed = 'an absolute path on one line, without . or .. segments'
    return (check('runtime_env_venv', values, is_absolute_path, allowed)
            + check('runtime_env_system_python', values, is_absolute_path, allowed)
            + check('runtime_env_adopt_backup_dir', values, lambda v: is_absolute_path(v) and v.rstrip('/') != '', allowed
                    + ', not /'))


def check_toolkit_paths(values, probes):
    # CUDA_HOME's bin goes on PATH, hence no ':'.
    return (check('runtime_env_cuda_home', values, lambda v: v == '' or _is_path_entry(v),
                  "empty or an absolute path on one line without ':' (its bin goes on PATH)")
            + check('runtime_env_ptxas', values, lambda v: v == '' or is_absolute_path(v),
                    'empty or an absolute path on one line, without . or .. segments')
            + check('runtime_env_ptxas_blackwell', values, lambda v: v == '' or is_absolute_path(v),
                    'empty or an absolute path on one line, without . or .. segments (TRITON_PTXAS_BLACKWELL_PATH)'))


def check_systemd_path(values, probes):
    return check('runtime_env_systemd_path', values, lambda v: isinstance(v, str) and SYSTEMD_PATH.match(v),
                 "absolute directories joined by ':', made of letters, digits and - _ . + @ /")


def check_topology(values, probes):
    topologies = values['__runtime_env_topologies'] or []
    return check('runtime_env_topology', values, lambda v: v == '' or v.lower() in topologies,
                 'empty (read it with gpu_info) or a gpu_info topology summary, any case (%s)' % ', '.join(topologies))


def check_profiles(values, probes):
    """Every profile's name and shape, the built-ins too (an override of __runtime_env_nccl_profiles
    gets the same checks)."""
    found = []
    for name in (BUILTIN_PROFILES, PROFILES):
        if not is_mapping(values[name]):
            found.append(problem(name, values[name], 'a mapping of profile names to mappings of variables'))
    if found:
        return found
    for name, (origin, profile) in sorted(_profiles(values).items(), key=lambda item: str(item[0])):
        if not (isinstance(name, str) and PLAIN_NAME.match(name) and name != 'auto'):
            found.append(problem(origin, _entry(name, profile), 'profile names of letters, digits, _ . -, '
                                 'not starting with . or -, and not auto'))
        elif not is_mapping(profile):
            found.append(problem('%s.%s' % (origin, name), profile,
                                 'a mapping of variable names to strings or numbers ({} sets nothing)'))
    return found


def _variable_problem(origin, key, value, platform):
    """The one problem of a variable of a profile (platform: the variables a profile may not set)
    or of runtime_env_extra_vars (platform None), or None."""
    if not (isinstance(key, str) and VAR_NAME.match(key)):
        return problem(origin, _entry(key, value), 'variable names matching [A-Za-z_][A-Za-z0-9_]*')
    name, secret = '%s.%s' % (origin, key), _secret_key(key)
    if key == 'PATH':
        return problem(name, value, 'any variable but PATH (PATH entries go in runtime_env_extra_path)', secret)
    if platform is not None and key in platform:
        return problem(name, value, 'any variable but %s in a profile, which belong to the platform'
                       % ' and '.join(platform), secret)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return problem(name, value, 'a string or a number (quote booleans, e.g. "1")', secret)
    text = str(value)
    if CONTROL.search(text):
        return problem(name, value, 'a one-line value (no control characters)', secret)
    if key in RULES and not RULES[key][0].match(text):
        return problem(name, value, RULES[key][1], secret)
    return _loader_problem(name, key, value, secret)


def check_variables(values, probes):
    """One rule set for every variable that reaches the spec: every profile's, built-in or not, and
    runtime_env_extra_vars' (the toolkit paths are checked above; the cuDNN switch is a literal 1)."""
    found = []
    extra = values[EXTRA_VARS]
    if not is_mapping(extra):
        found.append(problem(EXTRA_VARS, extra, 'a mapping of variable names to strings or numbers'))
        extra = {}
    platform = values['__runtime_env_platform_vars'] or []
    items = [('%s.%s' % (origin, name), profile, platform)
             for name, (origin, profile) in sorted((_profiles(values) or {}).items(), key=lambda item: str(item[0]))
             if isinstance(name, str) and PLAIN_NAME.match(name) and is_mapping(profile)]
    for origin, variables, forbidden in items + [(EXTRA_VARS, extra, None)]:
        for key, value in sorted(variables.items(), key=lambda item: str(item[0])):
            one = _variable_problem(origin, key, value, forbidden)
            if one:
                found.append(one)
    return found


def check_loader_files(values, probes):
    """runtime_env_extra_vars' LD_PRELOAD and LD_AUDIT files against the host (the module's docstring):
    each program started in this environment loads them, and a missing one makes each print a loader
    error. A value check_variables refuses is its to name."""
    extra, files = values[EXTRA_VARS], probes.get('loader_files')
    if not (is_mapping(extra) and is_mapping(files)):
        return []
    venv = values['runtime_env_venv']
    venv_seen = ((probes.get('venv') or {}).get('stat') or {}) if is_mapping(probes.get('venv')) else None
    # A venv the ml_env role makes later in this run: its files are judged by the role's own validate.
    later = venv if isinstance(venv, str) and is_absolute_path(venv) and venv_seen is not None \
        and not venv_seen.get('exists') else None
    found = []
    for key in sorted(LOADER_FILES):
        value = extra.get(key)
        if not isinstance(value, str) or _variable_problem(EXTRA_VARS, key, value, None):
            continue
        bad = []
        for entry in _loader_entries(key, value):
            seen = files.get(entry)
            if not is_mapping(seen) or seen.get('skipped'):
                continue
            stat = seen.get('stat') or {}
            if stat.get('exists') and stat.get('isreg'):
                continue
            if not stat.get('exists') and later and entry.startswith(later.rstrip('/') + '/'):
                continue
            bad.append('%s %s' % (entry, 'is not a regular file' if stat.get('exists') else 'does not exist'))
        if bad:
            found.append(problem('%s.%s' % (EXTRA_VARS, key), value, 'files that exist on the host (every program '
                                 'started in this environment loads them: a missing one makes each print a loader '
                                 'error); %s' % '; '.join(bad)))
    return found


def check_topology_map(values, probes):
    topologies = values['__runtime_env_topologies'] or []
    builtin, user = values[BUILTIN_TOPOLOGY_MAP], values[TOPOLOGY_MAP]
    found = [problem(name, values[name], 'a mapping of topology summaries to profile names')
             for name in (BUILTIN_TOPOLOGY_MAP, TOPOLOGY_MAP) if not is_mapping(values[name])]
    profiles = _profiles(values)
    if found or profiles is None:
        return found
    merged = dict((key, (BUILTIN_TOPOLOGY_MAP, value)) for key, value in builtin.items())
    merged.update((key, (TOPOLOGY_MAP, value)) for key, value in user.items())
    for key, (origin, value) in sorted(merged.items(), key=lambda item: str(item[0])):
        if key not in topologies:
            found.append(problem(origin, _entry(key, value), 'keys that are gpu_info topology summaries in lower case (%s)'
                                 % ', '.join(topologies)))
        elif not (isinstance(value, str) and value in profiles):
            found.append(problem('%s.%s' % (origin, key), value, 'a profile: ' + _profile_choices(profiles)))
    return found


def check_profile_choice(values, probes):
    profiles = _profiles(values)
    if profiles is None:
        return []
    return check('runtime_env_nccl_profile', values, lambda v: v == 'auto' or (isinstance(v, str) and v in profiles),
                 'auto or ' + _profile_choices(profiles))


def check_extra_path(values, probes):
    paths = values['runtime_env_extra_path']
    if paths is MISSING or not is_list(paths):
        return [problem('runtime_env_extra_path', paths, "a list of absolute directories on one line without ':'")]
    return [problem('runtime_env_extra_path[%d]' % index, entry, "an absolute directory on one line without ':'")
            for index, entry in enumerate(paths) if not _is_path_entry(entry)]


def check_arch_profiles(values, probes):
    """The per-architecture profiles, built-in and the operator's: capabilities as quoted strings
    ("12.0"), each a mapping of variables checked like an NCCL profile's."""
    found = [problem(name, values[name], 'a mapping of compute capabilities ("12.0", quoted) to mappings of variables')
             for name in (BUILTIN_ARCH_PROFILES, ARCH_PROFILES) if not is_mapping(values[name])]
    if found:
        return found
    platform = values['__runtime_env_platform_vars'] or []
    for origin in (BUILTIN_ARCH_PROFILES, ARCH_PROFILES):
        for key, profile in sorted(values[origin].items(), key=lambda item: str(item[0])):
            if not (isinstance(key, str) and CAPABILITY.match(key)):
                found.append(problem(origin, _entry(key, profile), 'keys that are compute capabilities "X.Y" as quoted '
                                     'strings (YAML reads 12.0 unquoted as a number)'))
            elif not is_mapping(profile):
                found.append(problem('%s.%s' % (origin, key), profile,
                                     'a mapping of variable names to strings or numbers ({} sets nothing)'))
            else:
                found += [one for one in (_variable_problem('%s.%s' % (origin, key), name, value, platform)
                                          for name, value in sorted(profile.items(), key=lambda item: str(item[0]))) if one]
    return found


def check_compute_capability(values, probes):
    return check('runtime_env_compute_capability', values,
                 lambda v: v in ('', 'none') or (isinstance(v, str) and CAPABILITY.match(v)),
                 'empty (read it with gpu_info), none (no per-architecture variable) or a compute capability "X.Y"')


def check_triton(values, probes):
    archs = values['runtime_env_triton_archs']
    found = check('runtime_env_verify_triton', values, is_bool, 'a boolean (true or false)')
    if archs is MISSING or not is_list(archs):
        return found + [problem('runtime_env_triton_archs', archs, 'a list of architectures sm_XX (a or f may follow)')]
    return found + [problem('runtime_env_triton_archs[%d]' % index, arch, 'an architecture sm_XX (a or f may follow)')
                    for index, arch in enumerate(archs) if not (isinstance(arch, str) and ARCH.match(arch))]


CHECKS = (check_os_family, check_name, check_interpreter_paths, check_toolkit_paths, check_systemd_path, check_topology,
          check_profiles, check_variables, check_loader_files, check_topology_map, check_profile_choice, check_extra_path,
          check_arch_profiles, check_compute_capability, check_triton, check_adopt)
