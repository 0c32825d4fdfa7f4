# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What tests/bad_inputs/gpu_health.yml does not pin: the values each core renders (2.17 gives
strings where 2.21 gives numbers), versions YAML reads as numbers, and the messages' form."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.gpu import validate as gh
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import run_checks

DEFAULTS = {
    'gpu_health_checks': ['driver', 'gpus'],
    'gpu_health_require': [],
    'gpu_health_compute_capabilities': [],
    'gpu_health_toolkit_version': '',
    'gpu_health_driver_minimum': {'12': '525.60.13', '13': '580.65.06'},
    'gpu_health_ml_env_python': '',
    '__gpu_health_checks_all': ['driver', 'gpus', 'xid', 'pcie', 'p2p', 'gpu_clean', 'nccl'],
    '__gpu_health_os_family': 'Debian',
    '__gpu_health_os_families': ['Debian'],
    'gpu_health_expected_gpus': 0,
    'gpu_health_gpu_memory_threshold_mib': 1024,
    'gpu_health_nccl_gpus': 0,
    'gpu_health_nccl_timeout': 60,
    'gpu_health_nccl_size_mib': 64,
    'gpu_health_command_timeout': 30,
    'gpu_health_own_units': ['sglang-server.service'],
    'gpu_health_own_pid_files': [],
}


def problems(**changed):
    assert set(changed) <= set(gh.NAMES)
    return run_checks(gh.CHECKS, dict(DEFAULTS, **changed))


def test_defaults_pass_and_every_name_is_read():
    assert sorted(DEFAULTS) == sorted(gh.NAMES)
    assert problems() == []


@pytest.mark.parametrize('changed', [
    {'gpu_health_expected_gpus': '8'},  # 2.17 renders "{{ 8 }}" to a string
    {'gpu_health_compute_capabilities': [12.0, '9.0']},  # YAML reads an unquoted 12.0 as a number
    {'gpu_health_toolkit_version': 13.0},
    {'gpu_health_toolkit_version': '12.8'},
    {'gpu_health_driver_minimum': {'13': 580}},
    {'gpu_health_ml_env_python': '/opt/ml-env/current/bin/python'},
    {'gpu_health_own_units': []},
    {'gpu_health_own_units': ['sglang-server', 'sglang@a.service', 'sglang-server-x86_64\\x2d1.service']},
    {'gpu_health_own_pid_files': ['/var/log/sglang/sglang-server.pid']},
])
def test_accepted(changed):
    assert problems(**changed) == []


@pytest.mark.parametrize('changed, expected', [
    ({'gpu_health_nccl_size_mib': True}, 'gpu_health_nccl_size_mib = true is not allowed: a whole number of at least 1'),
    ({'gpu_health_command_timeout': '30s'}, 'gpu_health_command_timeout = "30s" is not allowed'),
    ({'gpu_health_checks': 'driver,gpus'}, 'gpu_health_checks = "driver,gpus" is not allowed: a list of checks from driver,'),
    ({'gpu_health_compute_capabilities': [True]}, 'gpu_health_compute_capabilities = [true] is not allowed'),
    ({'gpu_health_toolkit_version': '13.0\n'}, 'gpu_health_toolkit_version = "13.0\\n" is not allowed'),
    ({'gpu_health_toolkit_version': '13'}, 'gpu_health_toolkit_version = "13" is not allowed'),
    ({'gpu_health_driver_minimum': {'13': '580.65.06\n'}}, 'gpu_health_driver_minimum = {"13": "580.65.06\\n"}'),
    # The argument spec takes any type (raw): the check names the value and the mapping it wants.
    ({'gpu_health_driver_minimum': ['580.65.06']}, 'gpu_health_driver_minimum = ["580.65.06"] is not allowed: a mapping'),
    ({'gpu_health_driver_minimum': '13=580.65.06'}, 'gpu_health_driver_minimum = "13=580.65.06" is not allowed'),
    ({'gpu_health_ml_env_python': '/opt/ml-env/../bin/python'}, 'gpu_health_ml_env_python = "/opt/ml-env/../bin/python"'),
    ({'gpu_health_ml_env_python': '/opt/py\tthon'}, 'gpu_health_ml_env_python = "/opt/py\\tthon" is not allowed'),
    ({'__gpu_health_os_family': 'RedHat'}, '__gpu_health_os_family = "RedHat" is not allowed: gpu_health supports'),
    # The unit's name goes to systemctl as an argument: never an option, a path or two words.
    ({'gpu_health_own_units': ['-H', 'evil']}, 'gpu_health_own_units = ["-H", "evil"] is not allowed: a list of systemd'),
    ({'gpu_health_own_units': ['sglang server.service']}, 'gpu_health_own_units = ["sglang server.service"]'),
    ({'gpu_health_own_units': ['../sglang.service']}, 'gpu_health_own_units = ["../sglang.service"] is not allowed'),
    ({'gpu_health_own_units': 'sglang-server.service'}, 'gpu_health_own_units = "sglang-server.service" is not'),
    ({'gpu_health_own_units': [1]}, 'gpu_health_own_units = [1] is not allowed'),
    ({'gpu_health_own_pid_files': ['/var/log/../x.pid']}, 'gpu_health_own_pid_files = ["/var/log/../x.pid"] is not'),
    ({'gpu_health_own_pid_files': '/var/log/sglang/sglang-server.pid'}, 'gpu_health_own_pid_files = "/var/log/sglang/'),
])
def test_refused(changed, expected):
    found = problems(**changed)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_every_bad_number_is_named():
    found = problems(gpu_health_nccl_timeout=0, gpu_health_nccl_gpus=-2)
    assert [message.split(' = ')[0] for message in found] == ['gpu_health_nccl_gpus', 'gpu_health_nccl_timeout']
