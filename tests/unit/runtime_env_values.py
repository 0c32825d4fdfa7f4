# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""runtime_env's input as its checks see it, shared by its input tests (tests/unit is on sys.path: conftest.py)."""

from __future__ import annotations

from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import MISSING

# The role's defaults and vars/main.yml as the lookup renders them on a Debian host.
DEFAULTS = {
    'runtime_env_name': 'inferops-runtime-env',
    'runtime_env_venv': '/opt/ml-env',
    'runtime_env_system_python': '/usr/bin/python3',
    'runtime_env_adopt_backup_dir': '/var/backups/inferops-adopt',
    # The collection-wide switch, unset unless an inventory or -e sets it.
    'inferops_adopt': MISSING,
    'runtime_env_cuda_home': '',
    'runtime_env_ptxas': '',
    'runtime_env_systemd_path': '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    'runtime_env_topology': '',
    'runtime_env_nccl_profile': 'auto',
    'runtime_env_nccl_profiles': {},
    'runtime_env_nccl_profile_by_topology': {},
    'runtime_env_extra_vars': {},
    'runtime_env_extra_path': [],
    '__runtime_env_nccl_profiles': {'pcie_blackwell': {'NCCL_PROTO': 'LL', 'NCCL_NTHREADS': '512'}, 'nvlink': {}, 'none': {}},
    '__runtime_env_topology_profiles': {'pcie': 'pcie_blackwell', 'nvlink': 'nvlink'},
    '__runtime_env_topologies': ['none', 'single', 'nvlink', 'pcie', 'mixed', 'unknown'],
    '__runtime_env_platform_vars': ['NCCL_NVLS_ENABLE', 'TORCH_SYMM_MEM_DISABLE_MULTICAST'],
    '__runtime_env_os_family': 'Debian',
    '__runtime_env_os_families': ['Debian'],
    'runtime_env_ptxas_blackwell': '',
    'runtime_env_compute_capability': '',
    'runtime_env_arch_profiles': {},
    '__runtime_env_arch_profiles': {'12.0': {'FLASHINFER_CUDA_ARCH_LIST': '12.0a', 'SGLANG_ENABLE_JIT_DEEPGEMM': '0'}},
    'runtime_env_verify_triton': True,
    'runtime_env_triton_archs': ['sm_90', 'sm_100', 'sm_120'],
}
