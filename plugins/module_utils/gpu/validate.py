# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_health role's input checks (input_checks.py says how they are shaped).

The argument spec has refused unknown checks and values of the wrong type; what it lets through
and these refuse: a string where a list belongs (the spec's list type splits it), versions that
are not major.minor, negative numbers, a relative ml-env python, and own units or pid files that
are not unit names or absolute paths, and a host of another OS family (check_os_family; the
bad-input table stands a Red Hat host in through __gpu_health_os_family).
"""

from __future__ import annotations

import re

from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import (
    os_family_check,
    check,
    is_absolute_path,
    is_int,
    is_list,
    is_mapping,
    problem,
)

# As nvidia-smi writes a compute capability: "12.0" is sm_120.
CAPABILITY = re.compile(r'^[0-9]+\.[0-9]+\Z')
DRIVER_VERSION = re.compile(r'^[0-9]+(\.[0-9]+)*\Z')
# The toolkit's major.minor, or "" (no comparison).
TOOLKIT_VERSION = re.compile(r'^([0-9]+\.[0-9]+)?\Z')
# A systemd unit name (systemd.unit(5)); the module passes it to systemctl, which must not read an option.
UNIT = re.compile(r'^[A-Za-z0-9:_.@\\][A-Za-z0-9:_.@\\-]{0,255}\Z')
# The least value of each number the module reads.
NUMBERS = (
    ('gpu_health_expected_gpus', 0),
    ('gpu_health_gpu_memory_threshold_mib', 0),
    ('gpu_health_nccl_gpus', 0),
    ('gpu_health_nccl_timeout', 1),
    ('gpu_health_nccl_size_mib', 1),
    ('gpu_health_command_timeout', 1),
)

NAMES = (
    'gpu_health_checks',
    'gpu_health_require',
    'gpu_health_compute_capabilities',
    'gpu_health_toolkit_version',
    'gpu_health_driver_minimum',
    'gpu_health_ml_env_python',
    'gpu_health_own_units',
    'gpu_health_own_pid_files',
    '__gpu_health_checks_all',
    '__gpu_health_os_family',
    '__gpu_health_os_families',
) + tuple(number[0] for number in NUMBERS)


def _text(value):
    """A version as `| string` writes it: YAML may read 12.0 or 13 as a number (never a boolean here)."""
    if isinstance(value, bool):
        raise TypeError(value)
    return value if isinstance(value, str) else str(value)


check_os_family = os_family_check('gpu_health')


def check_check_lists(values, probes):
    known = ', '.join(values['__gpu_health_checks_all'] or [])
    return (check('gpu_health_checks', values, is_list, 'a list of checks from %s' % known)
            + check('gpu_health_require', values, is_list,
                    'a list of checks from %s ([] reports without failing)' % known))


def check_compute_capabilities(values, probes):
    return check('gpu_health_compute_capabilities', values,
                 lambda v: is_list(v) and all(CAPABILITY.match(_text(one)) for one in v),
                 'a list of compute capabilities as major.minor strings, for example ["12.0"] for sm_120')


def check_driver_minimum(values, probes):
    return check('gpu_health_driver_minimum', values,
                 lambda v: is_mapping(v) and all(DRIVER_VERSION.match(_text(one)) for one in v.values()),
                 'a mapping of CUDA major versions to driver versions, for example {"13": "580.65.06"}')


def check_toolkit_version(values, probes):
    return check('gpu_health_toolkit_version', values, lambda v: TOOLKIT_VERSION.match(_text(v)),
                 'the toolkit\'s major.minor, for example "13.0", or "" to skip the comparison')


def check_numbers(values, probes):
    found = []
    for name, low in NUMBERS:
        found.extend(check(name, values, lambda v, low=low: is_int(v, low), 'a whole number of at least %d' % low))
    return found


# Empty is fine here: the check play runs before the ml_env role publishes ml_env_python, and the
# module refuses the nccl check without a python before it runs anything.
def check_ml_env_python(values, probes):
    value = values['gpu_health_ml_env_python']
    if value == '' or is_absolute_path(value):
        return []
    return [problem('gpu_health_ml_env_python', value, 'the absolute path of the ml-env python (the ml_env role '
                    'publishes ml_env_python), or "" where the nccl check is not run')]


def check_own_units(values, probes):
    return check('gpu_health_own_units', values,
                 lambda v: is_list(v) and all(isinstance(one, str) and UNIT.match(one) for one in v),
                 'a list of systemd unit names, for example ["sglang-server.service"], or [] to name none')


def check_own_pid_files(values, probes):
    return check('gpu_health_own_pid_files', values, lambda v: is_list(v) and all(is_absolute_path(one) for one in v),
                 'a list of absolute paths of pid files, for example ["/var/log/sglang/sglang-server.pid"], or [] to '
                 'name none')


CHECKS = (check_os_family, check_check_lists, check_compute_capabilities, check_driver_minimum,
          check_toolkit_version, check_numbers, check_ml_env_python, check_own_units, check_own_pid_files)
