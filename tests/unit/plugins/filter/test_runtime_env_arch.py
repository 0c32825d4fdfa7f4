# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""runtime_env's per-architecture variables, chosen from what gpu_info reports of real hosts' output:
the H200 host's recorded nvidia-smi (h200x2_nvlink) gets none, an 8x RTX PRO 6000 host
(rtxpro6000x8_pcie, rebuilt from public output: its README) the SM120 ones."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible.module_utils import basic

from module_harness import TIMEOUT, invoke, patch_exits, unbounded
from ansible_collections.inferops.gpu.plugins.filter.runtime_env import FilterModule
from ansible_collections.inferops.gpu.plugins.module_utils.gpu import facts as gpu_facts
from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env.arch import choose, host_capabilities
from ansible_collections.inferops.gpu.plugins.modules import gpu_info

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SM120 = {'FLASHINFER_CUDA_ARCH_LIST': '12.0a', 'SGLANG_ENABLE_JIT_DEEPGEMM': '0'}


def builtin_profiles():
    with open(os.path.join(ROOT, 'roles', 'runtime_env', 'vars', 'main.yml')) as handle:
        return yaml.safe_load(handle)['__runtime_env_arch_profiles']


def _no_pynvml():
    raise ImportError("No module named 'pynvml'")


@pytest.fixture
def gpus_of(monkeypatch, smi_replay):
    """gpu_info's gpus for a recorded host's nvidia-smi output, through the module itself."""
    patch_exits(monkeypatch)
    monkeypatch.setattr(gpu_facts, 'import_pynvml', _no_pynvml)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path',
                        lambda self, name, *a, **k: {'nvidia-smi': '/usr/bin/nvidia-smi', 'timeout': TIMEOUT}.get(name))

    def read(system):
        replay = smi_replay(system)
        monkeypatch.setattr(basic.AnsibleModule, 'run_command', lambda self, argv, **kwargs: replay(unbounded(argv)))
        return invoke(gpu_info, {})['gpus']
    return read


arch = FilterModule().filters()['runtime_env_arch']


def test_the_rtx_pro_6000_host_gets_the_sm120_variables(gpus_of):
    gpus = gpus_of('rtxpro6000x8_pcie')
    assert host_capabilities(gpus) == ['12.0']
    assert arch(gpus, '', builtin_profiles()) == {
        'capability': '12.0', 'vars': SM120, 'reason': 'the profile of compute capability 12.0'}


def test_the_h200_host_gets_none(gpus_of):
    gpus = gpus_of('h200x2_nvlink')
    assert host_capabilities(gpus) == ['9.0']
    assert arch(gpus, '', builtin_profiles()) == {
        'capability': '9.0', 'vars': {}, 'reason': 'no per-architecture profile for compute capability 9.0'}


def test_a_host_without_a_driver_gets_none(gpus_of):
    assert arch(gpus_of('broken_driver'), '', builtin_profiles())['vars'] == {}


def test_mixed_capabilities_get_none():
    gpus = [{'compute_capability': '12.0'}, {'compute_capability': '9.0'}, {'compute_capability': None}]
    capability, variables, reason = choose('', gpus, builtin_profiles())
    assert (capability, variables) == ('none', {})
    assert reason == 'the GPUs report several compute capabilities (9.0, 12.0): no per-architecture profile fits all'


def test_the_setting_wins_over_the_gpus_and_none_switches_it_off(gpus_of):
    h200 = gpus_of('h200x2_nvlink')
    assert arch(h200, '12.0', builtin_profiles())['vars'] == SM120  # a container that will serve on SM120
    assert arch(gpus_of('rtxpro6000x8_pcie'), 'none', builtin_profiles()) == {
        'capability': 'none', 'vars': {}, 'reason': 'runtime_env_compute_capability is none'}


def test_an_operators_profile_replaces_the_builtin_whole():
    profiles = dict(builtin_profiles(), **{'12.0': {'FLASHINFER_CUDA_ARCH_LIST': '12.0f', 'X': 1}})
    assert choose('12.0', [], profiles)[1] == {'FLASHINFER_CUDA_ARCH_LIST': '12.0f', 'X': '1'}
