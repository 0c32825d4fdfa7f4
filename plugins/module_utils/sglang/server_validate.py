# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_server role's input checks (input_checks.py says how they are shaped).

The argument spec (meta/argument_specs.yml, entry point validate) has checked the types and the
choices, but converts on the way (a string of digits for an int, "a,b" for a list, "k=v" for a
dict) and the role reads the raw values: so these checks still ask for a list, a mapping or a
string where the role iterates or matches one.
"""

from __future__ import annotations

import re

from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import (
    ADOPT, check_adopt, os_family_check,
    CONTROL, DOT_SEGMENT, MISSING, check, is_absolute_path, is_int, is_list, is_mapping, is_port, is_secret, problem, shown,
)
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.versions import (
    SUPPORTED, is_supported, parse as parse_version, removed_arg_problems,
)

# Patterns end at \Z: `$` also matches before a trailing newline.
# Paths go into unit settings that split on whitespace (ReadWritePaths=), hence a narrow set.
PATH = re.compile(r'^(/[A-Za-z0-9_.@+-]+)+\Z')
PATH_ALLOWED = ('an absolute path of letters, digits and _ . @ + - (it goes into unit settings that split on spaces), '
                'without . or .. segments')
HUB_ID = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_.-]*/[A-Za-z0-9_][A-Za-z0-9_.-]*\Z')
HOST = re.compile(r'^[A-Za-z0-9_.:][A-Za-z0-9_.:-]*\Z')
ACCOUNT = re.compile(r'^[a-z_][a-z0-9_-]{0,31}\Z')
UNIT = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}\Z')
ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*\Z')
# It goes into a YAML file and an HTTP header.
SECRET = re.compile(r'^[\x21-\x7e]*\Z')
SIZE = re.compile(r'^[1-9][0-9]*[kMG]?\Z')
VERSION = re.compile(r'^[0-9]+\.[0-9]+(\.[0-9]+)?\Z')
# A plain decimal: no sign, exponent, inf or nan (float() and the spec's float take them all).
DECIMAL = re.compile(r'^([0-9]+([.][0-9]*)?|[.][0-9]+)\Z')
# Home directories ProtectHome= hides (yes, tmpfs) from the server.
HOME_DIRS = re.compile(r'^/(home|root|run/user)(/|\Z)')

PROTECT_HOME = ('yes', 'read-only', 'tmpfs', 'no')
PREFLIGHT_CHECKS = ('model_path', 'gpu_count', 'gpu_clean', 'port', 'log_dir', 'release', 'driver')
# Options the role sets from its own variables: in the args they would be a second, conflicting
# source (or put a secret in argv). argparse takes any unique prefix of an option, so a prefix of
# one of these is refused too (the first that it is a prefix of names the variable).
OWNED_OPTIONS = (
    ('--model-path', 'the role sets --model-path from sglang_server_model_path'),
    ('--model', 'the role sets --model-path from sglang_server_model_path'),
    ('--host', 'the role sets --host from sglang_server_host'),
    ('--port', 'the role sets --port from sglang_server_port'),
    ('--api-key', 'the role sets --api-key from sglang_server_api_key'),
    ('--config', 'the role passes its own --config with the secrets'),
    ('--served-model-name', 'the role sets --served-model-name from sglang_server_served_model_name'),
    ('--trust-remote-code', 'the role sets --trust-remote-code from sglang_server_trust_remote_code'),
    ('--enable-metrics', 'the role sets --enable-metrics from sglang_server_enable_metrics'),
)
# Environment variables with a variable of their own.
OWNED_ENV = {'HF_TOKEN': 'sglang_server_hf_token', 'HUGGING_FACE_HUB_TOKEN': 'sglang_server_hf_token'}
# Values the role reads from the args (vars/main.yml's __sglang_server_read_options maps the
# options to these): the least each may be.
READ_MINIMUM = {'tp': 1, 'pp': 1, 'node_rank': 0, 'nnodes': 1}
READ_WHY = {'tp': "the preflight's GPU count", 'pp': "the preflight's GPU count", 'node_rank': 'whether the gate probes',
            'nnodes': 'a multi-node launch'}
# Read values that are words, not numbers: {key: (allowed values, why)} (SGLang's own choices).
READ_CHOICES = {'log_level': (('debug', 'info', 'warning', 'warn', 'error', 'critical', 'fatal'),
                              'whether the log prints the ready line, an INFO line (the levels of logging)')}

PATHS = (
    'sglang_server_home', 'sglang_server_log_dir', 'sglang_server_cache_dir', 'sglang_server_config_dir',
    'sglang_server_python', 'sglang_server_release_path', 'sglang_server_environment_file', 'sglang_server_state_dir',
)
# Whole seconds or counts: (variable, minimum).
NUMBERS = (
    ('sglang_server_log_rotate_count', 1),
    ('sglang_server_restart_sec', 0),
    ('sglang_server_start_limit_burst', 1),
    ('sglang_server_start_limit_interval', 1),
    ('sglang_server_stop_timeout', 1),
    ('sglang_server_limit_nofile', 1024),
    ('sglang_server_timeout', 1),
    ('sglang_server_stall_timeout', 1),
    ('sglang_server_progress_interval', 1),
    ('sglang_server_preflight_gpu_memory_threshold_mib', 0),
    ('sglang_server_command_timeout', 1),
    ('sglang_server_throughput_concurrency', 1),
    ('sglang_server_throughput_requests', 1),
    ('sglang_server_throughput_max_new_tokens', 1),
    ('sglang_server_liveness_interval', 1),
    ('sglang_server_liveness_failures', 1),
    ('sglang_server_liveness_timeout', 1),
)
SECRETS = ('sglang_server_api_key', 'sglang_server_hf_token')
ARGS = ('sglang_server_args', 'sglang_server_extra_args')

NAMES = (
    ADOPT,
    '__sglang_server_os_family',
    '__sglang_server_os_families',
    'sglang_server_model_path',
    'sglang_server_host',
    'sglang_server_port',
    'sglang_server_served_model_name',
    'sglang_server_user',
    'sglang_server_group',
    'sglang_server_unit_name',
    'sglang_server_release',
    'sglang_server_toolkit_version',
    'sglang_server_log_rotate_size',
    'sglang_server_protect_home',
    '__sglang_server_protect_home',
    'sglang_server_preflight_ignore',
    'sglang_server_throughput_baseline',
    'sglang_server_throughput_ratio',
    'sglang_server_extra_environment',
    '__sglang_server_read_options',
    'sglang_server_sglang_version',
    'inventory_hostname',
) + PATHS + tuple(name for name, _minimum in NUMBERS) + SECRETS + ARGS


def is_path(value):
    return isinstance(value, str) and bool(PATH.match(value)) and not DOT_SEGMENT.search(value)


def is_decimal(value):
    """A plain decimal number (also as a string, as `-e` passes it); never a boolean."""
    return not isinstance(value, bool) and isinstance(value, (int, float, str)) and bool(DECIMAL.match(str(value)))


check_os_family = os_family_check('sglang_server')


def check_model_path(values, probes):
    return check('sglang_server_model_path', values, lambda v: is_absolute_path(v) or bool(HUB_ID.match(v)),
                 'the absolute path of the model directory or a Hugging Face repo id such as org/name (a path on one '
                 'line, with no . or .. segments)')


def check_host(values, probes):
    return check('sglang_server_host', values, lambda v: bool(HOST.match(v)),
                 'an IP address or a host name (letters, digits and . : _ -), such as 127.0.0.1 or 0.0.0.0')


def check_port(values, probes):
    return check('sglang_server_port', values, is_port, 'a port number from 1 to 65535')


def check_served_model_name(values, probes):
    return check('sglang_server_served_model_name', values,
                 lambda v: isinstance(v, str) and not CONTROL.search(v) and ':' not in v and not v.startswith('-'),
                 "empty (the model path) or a name on one line without ':' (SGLang reads name:adapter), not starting with -")


def account_checks(values, user, group):
    """A service account and its group (the server's and the gateway's): plain names, never root."""
    return (check(user, values, lambda v: bool(ACCOUNT.match(v)) and v != 'root',
                  'a system account name (lower case letters, digits, _ -, at most 32) other than root')
            + check(group, values, lambda v: bool(ACCOUNT.match(v)) and v != 'root',
                    'a group name (lower case letters, digits, _ -, at most 32) other than root'))


def unit_name_check(values, name, example):
    """A unit name the role appends .service to."""
    return check(name, values, lambda v: bool(UNIT.match(v)) and not v.endswith('.service'),
                 'a plain unit name without .service (letters, digits, _ . -, at most 200), such as %s' % example)


def check_accounts(values, probes):
    return account_checks(values, 'sglang_server_user', 'sglang_server_group')


def check_unit_name(values, probes):
    return unit_name_check(values, 'sglang_server_unit_name', 'sglang-server')


def check_paths(values, probes):
    found = []
    for name in PATHS:
        found.extend(check(name, values, is_path, PATH_ALLOWED))
    # Empty before ml_env ran (site.yml's check play); inputs.yml requires it.
    found.extend(check('sglang_server_release', values, lambda v: v == '' or is_path(v),
                       'empty (before ml_env ran) or ' + PATH_ALLOWED))
    return found


def check_toolkit_version(values, probes):
    # Empty before cuda_toolkit ran; inputs.yml requires it.
    return check('sglang_server_toolkit_version', values, lambda v: isinstance(v, str) and (v == '' or bool(VERSION.match(v))),
                 'empty (before cuda_toolkit ran) or a CUDA version such as 13.0 or 13.0.88')


def check_numbers(values, probes):
    found = []
    for name, minimum in NUMBERS:
        value = values.get(name, MISSING)
        if not is_int(value, minimum):
            # Counts and seconds, never secrets (max_new_tokens holds "token").
            found.append(problem(name, value, 'an integer of at least %d' % minimum, secret=False))
    return found


def check_stall_timeout(values, probes):
    # The stall limit only fires within the whole start's: a larger one never would. A number that
    # is no integer is check_numbers' to name.
    stall, overall = values.get('sglang_server_stall_timeout', MISSING), values.get('sglang_server_timeout', MISSING)
    if not (is_int(stall, 1) and is_int(overall, 1)) or int(stall) <= int(overall):
        return []
    return [problem('sglang_server_stall_timeout', stall, 'at most sglang_server_timeout (%s), the limit of the whole '
                    'start: a longer stall limit would never fire' % shown(overall), secret=False)]


def check_log_rotate_size(values, probes):
    return check('sglang_server_log_rotate_size', values,
                 lambda v: not isinstance(v, bool) and isinstance(v, (str, int)) and bool(SIZE.match(str(v))),
                 'a logrotate size, a positive integer of bytes with an optional k, M or G, such as 100M')


def check_protect_home(values, probes):
    # __sglang_server_protect_home: the value as the unit's ProtectHome= gets it (booleans as yes/no).
    setting = values['__sglang_server_protect_home']
    setting = setting.strip() if isinstance(setting, str) else setting
    if setting not in PROTECT_HOME:
        return [problem('sglang_server_protect_home', values['sglang_server_protect_home'],
                        "%s (systemd's ProtectHome=)" % ', '.join(PROTECT_HOME))]
    model_path = values['sglang_server_model_path']
    if setting in ('yes', 'tmpfs') and isinstance(model_path, str) and HOME_DIRS.match(model_path):
        return [problem('sglang_server_protect_home', values['sglang_server_protect_home'],
                        'read-only or no while sglang_server_model_path (%s) is under /home, /root or /run/user, which '
                        'ProtectHome=yes and tmpfs hide from the server' % shown(model_path))]
    return []


def check_preflight_ignore(values, probes):
    return check('sglang_server_preflight_ignore', values, lambda v: is_list(v) and all(item in PREFLIGHT_CHECKS for item in v),
                 'a list of preflight checks to skip: %s' % ', '.join(PREFLIGHT_CHECKS))


def check_throughput(values, probes):
    return (check('sglang_server_throughput_baseline', values, is_decimal,
                  '0 (the baseline the host recorded) or the output tokens per second the host must reach, a number such as 96.1')
            + check('sglang_server_throughput_ratio', values, lambda v: is_decimal(v) and 0 < float(v) <= 1,
                    'a number above 0 and at most 1 (the least share of the baseline), such as 0.8'))


def check_secrets(values, probes):
    found = []
    for name in SECRETS:
        found.extend(check(name, values, lambda v: isinstance(v, str) and bool(SECRET.match(v)),
                           'printable ASCII without spaces (it goes into a YAML file and an HTTP header)'))
    key = values.get('sglang_server_api_key')
    if isinstance(key, str) and SECRET.match(key) and key.startswith('-'):
        # sglang's --config reader (ConfigArgumentMerger._add_scalar_arg) hands each value to argparse as a word of
        # its own, which takes one that starts with "-" for an option: the server would not start.
        found.append(problem('sglang_server_api_key', key, 'a key that does not start with "-" (SGLang reads its '
                             '--config values as separate argv words, and argparse takes such a word for an option); '
                             'make another key, e.g. openssl rand -hex 32'))
    return found


def check_extra_environment(values, probes):
    name = 'sglang_server_extra_environment'
    environment = values[name]
    if not is_mapping(environment):
        return [problem(name, environment, 'a mapping of variable names to strings or numbers')]
    found = []
    for key, value in environment.items():
        where = '%s.%s' % (name, key)
        secret = key in OWNED_ENV or is_secret(str(key).lower())
        if not isinstance(key, str) or not ENV_NAME.match(key):
            found.append(problem(name, {str(key): '(hidden)' if secret else value},
                                 'variable names matching [A-Za-z_][A-Za-z0-9_]*'))
        elif key in OWNED_ENV:
            found.append(problem(where, value, 'set %s instead, which the role keeps in a 0600 file' % OWNED_ENV[key],
                                 secret=True))
        elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
            found.append(problem(where, value, 'a string or a number (quote booleans, e.g. "1")', secret=secret))
        elif CONTROL.search(str(value)):
            found.append(problem(where, value, 'a one-line value without control characters', secret=secret))
    return found


def words(values):
    """[(where, word)] of the args then the extra args, each as its string (as the role passes it)."""
    found = []
    for name in ARGS:
        if is_list(values[name]):
            found.extend(('%s[%d]' % (name, index), str(arg)) for index, arg in enumerate(values[name]))
    return found


def check_args(values, probes):
    # Each element is one argv word (no shell). Options the role owns come from their variables.
    found = []
    for name in ARGS:
        args = values[name]
        if not is_list(args):
            found.append(problem(name, args, 'a list of arguments, one argv word each'))
            continue
        for index, arg in enumerate(args):
            where = '%s[%d]' % (name, index)
            if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
                found.append(problem(where, arg, 'a string or a number (one argv word)'))
            elif CONTROL.search(str(arg)):
                found.append(problem(where, arg, 'one line without control characters'))
            elif isinstance(arg, str) and arg.startswith('--') and len(arg.split('=', 1)[0]) > 2:
                option = arg.split('=', 1)[0]
                owned = [why for full, why in OWNED_OPTIONS if full.startswith(option)]
                if owned:
                    # A value after = may be a secret: never shown.
                    found.append(problem(where, option + ('=...' if '=' in arg else ''),
                                         'any other SGLang option: %s' % owned[0]))
                # Against a release the collection knows; another one is check_sglang_version's to name.
                version = values['sglang_server_sglang_version']
                for why in (removed_arg_problems([option], version) if is_supported(version) else []):
                    found.append(problem(where, option, 'an option sglang %s takes: %s'
                                         % (values['sglang_server_sglang_version'], why)))
    return found


def check_sglang_version(values, probes):
    version = values['sglang_server_sglang_version']
    if not isinstance(version, str) or parse_version(version) is None:
        return [problem('sglang_server_sglang_version', version, 'an SGLang version such as 0.5.9 or 0.5.23')]
    # Its texts, arguments and endpoints are checked in the wheels of these only (make contract): another one is
    # refused here, not rendered with the arguments of a release near it (issue 41: 0.5.21 passed unnoticed).
    if not is_supported(version):
        return [problem('sglang_server_sglang_version', version, 'a release the collection supports: %s (a local '
                        'label or a .postN may follow, e.g. 0.5.9+cu130); it is the sglang the ml-env profile pins'
                        % ', '.join(SUPPORTED))]
    return []


def _read_values(values):
    """({key: (position, variable, word, option, value)} of the options the role reads from the args (the
    last one given counts), the args as (variable, word)); None when the option table is unusable."""
    options = values['__sglang_server_read_options'] or {}
    if not is_mapping(options):
        return None, []
    given = words(values)
    read, want = {}, None
    for position, (where, word) in enumerate(given):
        option = word.split('=', 1)[0]
        if want:
            read[want[1]] = (position, where, word, want[0], word)
            want = None
        elif word in options:
            want = (word, options[word])
        elif '=' in word and option in options:
            read[options[option]] = (position, where, word, option, word.split('=', 1)[1])
    return read, given


def check_gpu_count(values, probes):
    """tp x pp against the GPUs the host has (probe `gpus`: gpu_info's result, read by the check play's
    validate_gpus entry point only, which does not run when gpu_count is in sglang_server_preflight_ignore).
    A host where gpu_info finds no GPU at all is refused here too, with the preflight's fix (issue 41: the
    preflight named it 158 tasks into a roll); bad --tp/--pp values are check_read_values'."""
    gpus = probes.get('gpus')
    if not is_mapping(gpus) or gpus.get('skipped') or not is_int(gpus.get('count'), 0):
        return []
    read, dummy = _read_values(values)
    if read is None:
        return []
    sizes = dict((key, read[key][4] if key in read else '1') for key in ('tp', 'pp', 'nnodes'))
    # A member of a TP group: the role sets --nnodes (probe `nnodes`, the group's size).
    if is_int(probes.get('nnodes'), 1):
        sizes['nnodes'] = probes['nnodes']
    if not all(is_int(value, 1) for value in sizes.values()):
        return []
    tp, pp, nnodes, count = int(sizes['tp']), int(sizes['pp']), int(sizes['nnodes']), int(gpus['count'])
    if tp * pp // nnodes <= count:
        return []
    host = values.get('inventory_hostname') or 'the host'
    over = ' / %d nodes' % nnodes if nnodes > 1 else ''
    if count == 0:
        why = gpus.get('reason') or 'no GPU found (backend %s)' % (gpus.get('backend') or 'none')
        return [problem('sglang_server_preflight_ignore', values['sglang_server_preflight_ignore'],
                        'a host with GPUs for --tp %d x --pp %d%s = %d GPUs: %s has none (gpu_info: %s); install or '
                        'repair the NVIDIA driver, or list gpu_count and gpu_clean in sglang_server_preflight_ignore on '
                        'a host without GPUs' % (tp, pp, over, tp * pp // nnodes, host, why))]
    where = (read['tp'] if 'tp' in read else read['pp'])[1].split('[', 1)[0]
    return [problem(where, values[where], 'a tensor x pipeline parallel size the host has GPUs for: --tp %d x --pp %d%s = %d '
                    'GPUs, %s has %d (gpu_info); lower --tp/--pp, or list gpu_count in sglang_server_preflight_ignore '
                    'where the GPUs are not visible yet' % (tp, pp, over, tp * pp // nnodes, host, count))]


def check_read_values(values, probes):
    """The values the preflight and the probe read from the args (the last one given counts) must be numbers
    (the log level one of SGLang's choices)."""
    read, given = _read_values(values)
    if read is None:
        return []
    options = values['__sglang_server_read_options']
    found = []
    if given and given[-1][1] in options:
        where, word = given[-1]
        found.append(problem(where, word, '%s followed by a number, not as the last argument' % word))
    for key in sorted(read, key=lambda one: read[one][0]):
        _position, where, word, option, value = read[key]
        if key in READ_CHOICES:
            allowed, why = READ_CHOICES[key]
            if str(value).lower() not in allowed:
                found.append(problem(where, word, 'one of %s as the value of %s (the role reads it for %s)'
                                     % (', '.join(allowed), option, why)))
            continue
        minimum = READ_MINIMUM.get(key, 1)
        if not is_int(value, minimum):
            found.append(problem(where, word, 'an integer of at least %d as the value of %s (the role reads it for %s)'
                                 % (minimum, option, READ_WHY.get(key, key))))
    return found


CHECKS = (
    check_os_family, check_model_path, check_host, check_port, check_served_model_name, check_accounts, check_unit_name,
    check_paths, check_toolkit_version, check_numbers, check_stall_timeout, check_log_rotate_size, check_protect_home,
    check_preflight_ignore, check_throughput, check_secrets, check_extra_environment, check_sglang_version, check_args,
    check_read_values, check_adopt,
    check_gpu_count,
)
