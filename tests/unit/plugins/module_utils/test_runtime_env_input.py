# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runtime_env checks where tests/bad_inputs/runtime_env.yml does not pin them: secrets, a
proxy's credentials, the built-in profiles and map as origins, a type problem that must not
cascade, the edges of the path and name rules."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import validate as rt
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import MISSING, mask_credentials, run_checks, shown

from runtime_env_values import DEFAULTS  # tests/unit/runtime_env_values.py


def problems(**changes):
    values = dict(DEFAULTS, **changes)
    assert set(values) == set(rt.NAMES)
    return run_checks(rt.CHECKS, values)


def test_the_defaults_pass():
    assert problems() == []


def test_secret_values_are_never_shown():
    found = problems(runtime_env_extra_vars={'HF_TOKEN': 'hf_abc\n', 'DB_PASSWORD': True, '1_SECRET': 'xyz'})
    assert found == [
        'runtime_env_extra_vars = {"1_SECRET": "(hidden)"} is not allowed: variable names matching [A-Za-z_][A-Za-z0-9_]*',
        'runtime_env_extra_vars.DB_PASSWORD = (hidden) is not allowed: a string or a number (quote booleans, e.g. "1")',
        'runtime_env_extra_vars.HF_TOKEN = (hidden) is not allowed: a one-line value (no control characters)',
    ]
    found = problems(runtime_env_nccl_profiles={'../x': {'API_KEY': 'k-123'}})
    assert 'k-123' not in found[0] and '{"../x": {"API_KEY": "(hidden)"}}' in found[0]


def test_an_override_of_the_built_ins_is_named_as_such():
    found = problems(__runtime_env_nccl_profiles={'none': {}, 'pcie_blackwell': {'NCCL_NTHREADS': '1024'}},
                     __runtime_env_topology_profiles={'pcie': 'gone', 'nvlink': 'none'})
    assert found == [
        '__runtime_env_nccl_profiles.pcie_blackwell.NCCL_NTHREADS = "1024" is not allowed: '
        "one of 64, 128, 256, 512 (NCCL's documented values)",
        '__runtime_env_topology_profiles.pcie = "gone" is not allowed: a profile: none, pcie_blackwell '
        '(define more in runtime_env_nccl_profiles)',
    ]


def test_a_user_profile_replaces_the_built_in_whole():
    # The user's pcie_blackwell is checked (and named) in place of the built-in one.
    assert problems(runtime_env_nccl_profiles={'pcie_blackwell': {'NCCL_ALGO': 'Treee'}}) == [
        'runtime_env_nccl_profiles.pcie_blackwell.NCCL_ALGO = "Treee" is not allowed: a comma list of Ring, Tree, '
        'CollnetDirect, CollnetChain, NVLS, NVLSTree, PAT, optionally starting with ^, any case']


def test_a_mapping_given_as_key_value_text_is_one_problem():
    # The argument spec turns "a=b" into a dict for its own check only: the role would get the string.
    # The profile choice and the map are not judged against profiles that cannot be read.
    assert problems(runtime_env_nccl_profiles='h100=x', runtime_env_nccl_profile='h100') == [
        'runtime_env_nccl_profiles = "h100=x" is not allowed: a mapping of profile names to mappings of variables']
    assert problems(runtime_env_nccl_profile_by_topology='pcie=x') == [
        'runtime_env_nccl_profile_by_topology = "pcie=x" is not allowed: a mapping of topology summaries to profile names']


def test_extra_path_given_as_text():
    assert problems(runtime_env_extra_path='/opt/bin') == [
        'runtime_env_extra_path = "/opt/bin" is not allowed: a list of absolute directories on one line without \':\'']
    assert problems(runtime_env_extra_path=['/opt/a', '/opt/../etc'])[0].startswith('runtime_env_extra_path[1] = "/opt/../etc"')


@pytest.mark.parametrize('changes', [
    {'runtime_env_venv': '/opt/ml\tenv'},
    {'runtime_env_venv': '/opt/./ml-env'},
    {'runtime_env_system_python': MISSING},
    {'runtime_env_cuda_home': '/usr/local/cuda\x7f'},
    {'runtime_env_systemd_path': '/usr/bin:bin'},
    {'runtime_env_systemd_path': '/usr/bin:'},
    {'runtime_env_name': 'a' * 201},
    {'runtime_env_name': '-x'},
    {'runtime_env_topology': 7},
    {'runtime_env_nccl_profile': 'auto\n'},
    {'runtime_env_extra_vars': {'NCCL_P2P_LEVEL': 'SYS\t'}},
    {'runtime_env_extra_vars': {'NCCL_BUFFSIZE': 8.0}},
    {'runtime_env_extra_vars': {'INFEROPS_LIST': ['a']}},
    {'runtime_env_nccl_profile_by_topology': {7: 'none'}},
])
def test_edges_refused(changes):
    assert len(problems(**changes)) == 1


@pytest.mark.parametrize('changes', [
    {'runtime_env_name': 'a' * 200},
    {'runtime_env_venv': '/opt/ml-env/'},
    {'runtime_env_topology': 'MIXED'},
    {'runtime_env_extra_vars': {'NCCL_P2P_LEVEL': 3, 'NCCL_PROTO': '^ll128,SIMPLE', 'INFEROPS_RATIO': 0.5}},
    {'runtime_env_nccl_profiles': {'a.b_c-1': {}}, 'runtime_env_nccl_profile': 'a.b_c-1'},
])
def test_edges_accepted(changes):
    assert problems(**changes) == []


def test_a_proxys_credentials_are_masked_not_its_host():
    found = problems(runtime_env_extra_vars={'https_proxy': 'http://ops:s3cret@proxy.example:3128\n',
                                             'HTTP_PROXY': ['ops:s3cret@proxy.example:3128']})
    assert found == [
        'runtime_env_extra_vars.HTTP_PROXY = ["***@proxy.example:3128"] is not allowed: a string or a number (quote '
        'booleans, e.g. "1")',
        'runtime_env_extra_vars.https_proxy = "http://***@proxy.example:3128\\n" is not allowed: a one-line value (no '
        'control characters)',
    ]


@pytest.mark.parametrize('text, masked', [
    ('http://user:secret@proxy:3128', 'http://***@proxy:3128'),
    # A password with an @ or a space is masked whole: the mask runs to the last @ before the path.
    ('http://user:p@ss@proxy:3128', 'http://***@proxy:3128'),
    ('http://user:pa ss@proxy:3128', 'http://***@proxy:3128'),
    ('https://ci:tok@pypi.example/simple/pkg@1', 'https://***@pypi.example/simple/pkg@1'),
    # Written without its scheme, or after a name as `-e` may give it.
    ('user:secret@proxy:3128', '***@proxy:3128'),
    ('https_proxy=http://user:secret@proxy:3128', 'https_proxy=http://***@proxy:3128'),
    ('http://p1:3128 http://u:s@p2:3128', 'http://p1:3128 http://***@p2:3128'),
    # Nothing to mask.
    ('http://proxy:3128', 'http://proxy:3128'),
    ('localhost,.example.com', 'localhost,.example.com'),
    ('torch @ https://download.example/torch.whl', 'torch @ https://download.example/torch.whl'),
])
def test_mask_credentials(text, masked):
    assert mask_credentials(text) == masked


def test_shown_masks_keys_and_values_of_mappings():
    assert shown({'http://u:s@h:1': ['http://u:s@h:2']}) == '{"http://***@h:1": ["http://***@h:2"]}'


def test_arch_profiles_are_keyed_by_quoted_capabilities_and_checked_like_nccl_profiles():
    assert problems(runtime_env_arch_profiles={'12.0': {}, '10.0': {'FLASHINFER_CUDA_ARCH_LIST': '10.0a'}}) == []
    assert problems(runtime_env_arch_profiles={12.0: {}}) == [
        'runtime_env_arch_profiles = {"12.0": {}} is not allowed: keys that are compute capabilities "X.Y" as quoted '
        'strings (YAML reads 12.0 unquoted as a number)']
    assert problems(runtime_env_arch_profiles={'12.0': {'NCCL_NVLS_ENABLE': '1', 'PATH': '/x'}}) == [
        'runtime_env_arch_profiles.12.0.NCCL_NVLS_ENABLE = "1" is not allowed: any variable but NCCL_NVLS_ENABLE and '
        'TORCH_SYMM_MEM_DISABLE_MULTICAST in a profile, which belong to the platform',
        'runtime_env_arch_profiles.12.0.PATH = "/x" is not allowed: any variable but PATH (PATH entries go in '
        'runtime_env_extra_path)']
    assert problems(runtime_env_arch_profiles={'12.0': ['FLASHINFER_CUDA_ARCH_LIST']})[0].startswith(
        'runtime_env_arch_profiles.12.0 = ["FLASHINFER_CUDA_ARCH_LIST"] is not allowed: a mapping of variable names')


@pytest.mark.parametrize('value, good', [('', True), ('none', True), ('12.0', True), ('9.0', True), ('12', False),
                                         ('sm_120', False), ('12.0\n', False), (12.0, False)])
def test_the_compute_capability_setting(value, good):
    assert (problems(runtime_env_compute_capability=value) == []) is good


def test_the_triton_proof_settings():
    assert problems(runtime_env_triton_archs=['sm_120a', 'sm_90f']) == []
    assert problems(runtime_env_triton_archs=['sm_120', 'compute_90'], runtime_env_verify_triton='maybe') == [
        'runtime_env_verify_triton = "maybe" is not allowed: a boolean (true or false)',
        'runtime_env_triton_archs[1] = "compute_90" is not allowed: an architecture sm_XX (a or f may follow)']
    assert problems(runtime_env_ptxas_blackwell='bin/ptxas')[0].startswith(
        'runtime_env_ptxas_blackwell = "bin/ptxas" is not allowed: empty or an absolute path')


@pytest.mark.parametrize('value, good', [(MISSING, True), (True, True), ('false', True), ('yes', True), ('maybe', False),
                                         (1, False), ('', False)])
def test_the_adoption_switch_is_a_boolean(value, good):
    found = problems(inferops_adopt=value)
    assert found == ([] if good else ['inferops_adopt = %s is not allowed: a boolean (true takes over what was set by '
                                      'hand; false, the default, refuses it)' % shown(value)])


def test_the_backup_directory_is_absolute_and_not_the_root():
    assert problems(runtime_env_adopt_backup_dir='/') == [
        'runtime_env_adopt_backup_dir = "/" is not allowed: an absolute path on one line, without . or .. segments, not /']
    assert len(problems(runtime_env_adopt_backup_dir='backups')) == 1
