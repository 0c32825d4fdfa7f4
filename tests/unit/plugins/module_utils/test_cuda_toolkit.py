# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json
import os
import struct

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.cuda_toolkit import toolkit as ct

NVCC_13 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""
PTXAS_12 = """ptxas: NVIDIA (R) Ptx optimizing assembler
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Fri_Feb_21_20:21:21_PST_2025
Cuda compilation tools, release 12.8, V12.8.93
Build cuda_12.8.r12.8/compiler.35583870_0
"""
LDCONFIG = """3 libs found in cache `/etc/ld.so.cache'
\tlibcudart.so.13 (libc6,x86-64) => /usr/local/cuda-13.0/lib64/libcudart.so.13
\tlibcudart.so.12 (libc6,AArch64) => /opt/arm/libcudart.so.12
\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda-12.8/lib64/libcudart.so.12
"""


def elf(abi_version, flags, machine=190):
    header = bytearray(64)
    header[:4] = b'\x7fELF'
    header[4], header[5], header[7], header[8] = 2, 1, 0x41 if abi_version >= 8 else 0x33, abi_version
    struct.pack_into('<HH', header, 16, 2, machine)
    struct.pack_into('<I', header, 48, flags)
    return bytes(header)


def test_parse_release():
    assert ct.parse_release(NVCC_13) == ('13.0', '13.0.88')
    assert ct.parse_release(PTXAS_12) == ('12.8', '12.8.93')
    assert ct.parse_release('ptxas fatal: nope') == (None, None)


def test_ldconfig_resolution_takes_the_machine_entry():
    entries = ct.parse_ldconfig(LDCONFIG)
    assert ct.resolve_soname(entries, 'libcudart.so.13', 'x86_64') == '/usr/local/cuda-13.0/lib64/libcudart.so.13'
    assert ct.resolve_soname(entries, 'libcudart.so.12', 'x86_64') == '/usr/local/cuda-12.8/lib64/libcudart.so.12'
    assert ct.resolve_soname(entries, 'libcudart.so.12', 'aarch64') == '/opt/arm/libcudart.so.12'
    assert ct.resolve_soname(entries, 'libcudart.so.11', 'x86_64') is None


def test_path_within_resolves_symlinks(tmp_path):
    home = tmp_path / 'cuda-13.0'
    (home / 'wheels').mkdir(parents=True)
    (home / 'wheels' / 'libcudart.so.13').write_text('')
    (tmp_path / 'elsewhere').mkdir()
    os.symlink(str(home / 'wheels' / 'libcudart.so.13'), str(tmp_path / 'elsewhere' / 'lib'))
    os.symlink(str(home), str(tmp_path / 'cuda-13'))
    assert ct.path_within(str(tmp_path / 'elsewhere' / 'lib'), str(tmp_path / 'cuda-13'))
    assert not ct.path_within(str(tmp_path / 'elsewhere'), str(home))
    assert not ct.path_within(str(tmp_path / 'cuda-13.0x'), str(home))


@pytest.mark.parametrize('data,arch', [
    (elf(8, 0x6007802), 120),  # ptxas 13.0 / 12.8, sm_120
    (elf(8, 0x6006402), 100),
    (elf(8, 0x6005a04), 90),   # ptxas 13.0, sm_90
    (elf(7, 0x4b055a), 90),    # ptxas 12.8, sm_90 (old ABI: low byte)
])
def test_cubin_arch(data, arch):
    assert ct.cubin_arch(data) == arch


def test_cubin_arch_refuses_other_files():
    with pytest.raises(ValueError, match='not an ELF'):
        ct.cubin_arch(b'#!/bin/sh\n' + bytes(64))
    with pytest.raises(ValueError, match='not CUDA'):
        ct.cubin_arch(elf(8, 0, machine=62))


def test_arch_number():
    assert ct.arch_number('sm_120') == 120
    assert ct.arch_number('sm_90a') == 90
    assert ct.arch_number('sm_100f') == 100
    for bad in ('compute_90', 'sm_120\n', 'sm_90x', None):
        with pytest.raises(ValueError):
            ct.arch_number(bad)


@pytest.mark.parametrize('path,relative,absolute', [
    ('lib64', True, False),
    ('nvvm/lib64/libnvvm.so', True, False),
    ('bin/cudafe++', True, False),
    ('/etc/hostname', False, True),
    ('/usr/local/cuda-13.0', False, True),
    ('../etc', False, False),
    ('lib64/../../etc', False, False),
    ('/usr/local/../etc', False, False),
    ('./lib64', False, False),
    ('lib64/', False, False),
    ('lib64\n', False, False),
    ('/usr/local\n', False, False),
    ('', False, False),
    (None, False, False),
])
def test_path_rules(path, relative, absolute):
    assert (ct.is_relative(path), ct.is_absolute(path)) == (relative, absolute)


def test_layout_errors_accept_the_role_layouts_and_name_each_bad_path():
    assert ct.layout_errors(CU12) == []
    bad = dict(CU12, kind='bogus', links={'/tmp/evil': '/etc/hostname', 'lib64/x': '../../y'},
               required=['../outside'], merge=[{'dest': 'bin', 'from': '/usr/bin'}, 'bin'])
    errors = ct.layout_errors(bad)
    assert errors == [
        'layout.kind must be one of cu12, cu13 (got "bogus")',
        'layout.merge[0].from must be a non-empty list of paths (got "/usr/bin")',
        'layout.merge[1] must be a mapping with keys dest, from and optionally match (got "bin")',
        'layout.links key "/tmp/evil" must be ' + ct.RELATIVE_ALLOWED,
        'layout.links["/tmp/evil"] target "/etc/hostname" must be ' + ct.RELATIVE_ALLOWED,
        'layout.links["lib64/x"] target "../../y" must be ' + ct.RELATIVE_ALLOWED,
        'layout.required "../outside" must be ' + ct.RELATIVE_ALLOWED,
    ]
    assert ct.layout_errors('cu13', option='cuda_toolkit_wheel_sets["13.0"].layout') == [
        'cuda_toolkit_wheel_sets["13.0"].layout must be a mapping (got "cu13")']


def test_wheels_errors():
    good = [{'name': 'nvidia-cuda-nvcc', 'version': '13.0.88', 'sha256': ['ab' * 32]}]
    assert ct.wheels_errors(good) == []
    assert ct.wheels_errors([]) == ['wheels must be a non-empty list of {name, version, sha256} (got [])']
    errors = ct.wheels_errors([{'name': 'six\n', 'version': '1.0\n', 'sha256': 'ab' * 32}])
    assert [error.split(' ')[0] for error in errors] == ['wheels[0].name', 'wheels[0].version', 'wheels[0].sha256']


def test_kernel_ptx_is_isa_8_for_ptxas_12_and_13():
    assert ct.KERNEL_PTX.startswith('.version 8.0\n.target sm_75\n')
    assert '__global__' in ct.KERNEL_CU


WHEELS = [{'name': 'nvidia-cuda-nvcc', 'version': '13.0.88', 'sha256': ['aa', 'bb']},
          {'name': 'nvidia-cuda-crt', 'version': '13.0.88', 'sha256': ['cc']}]


def test_requirements_and_stamp():
    assert ct.requirement_lines(WHEELS) == ('nvidia-cuda-nvcc==13.0.88 --hash=sha256:aa --hash=sha256:bb\n'
                                            'nvidia-cuda-crt==13.0.88 --hash=sha256:cc\n')
    stamp = json.loads(ct.stamp_text('13.0', 'cu13', WHEELS))
    assert stamp == {'cuda_version': '13.0', 'layout': 'cu13',
                     'wheels': ['nvidia-cuda-crt==13.0.88', 'nvidia-cuda-nvcc==13.0.88']}


CU12 = {
    'kind': 'cu12',
    'merge': [
        {'dest': 'bin', 'from': ['nvidia/cuda_nvcc/bin']},
        {'dest': 'include', 'from': ['nvidia/cuda_runtime/include', 'nvidia/cuda_nvcc/include']},
        {'dest': 'lib64', 'from': ['nvidia/cuda_runtime/lib']},
        {'dest': 'nvvm', 'from': ['nvidia/cuda_nvcc/nvvm']},
    ],
    'links': {'lib64/libcudart.so': 'libcudart.so.12'},
    'required': ['bin/ptxas', 'include/cuda_runtime.h', 'include/crt/host_defines.h', 'lib64/libcudart.so.12',
                 'nvvm/libdevice/libdevice.10.bc'],
}


def make_cu12_site(site):
    files = ['nvidia/__init__.py', 'nvidia/cuda_nvcc/bin/ptxas', 'nvidia/cuda_nvcc/include/__init__.py',
             'nvidia/cuda_nvcc/include/crt/host_defines.h', 'nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc',
             'nvidia/cuda_runtime/include/cuda_runtime.h', 'nvidia/cuda_runtime/include/__init__.py',
             'nvidia/cuda_runtime/lib/libcudart.so.12', 'nvidia/cuda_runtime/lib/__init__.py']
    for rel in files:
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel)


def test_cu12_layout_merges_packages_into_one_tree(tmp_path):
    home, site = tmp_path / 'cuda-12.8', tmp_path / 'cuda-12.8' / 'wheels'
    make_cu12_site(site)
    plan = ct.plan_links(str(home), str(site), CU12)
    assert plan == {
        'bin/ptxas': '../wheels/nvidia/cuda_nvcc/bin/ptxas',
        'include/crt': '../wheels/nvidia/cuda_nvcc/include/crt',
        'include/cuda_runtime.h': '../wheels/nvidia/cuda_runtime/include/cuda_runtime.h',
        'lib64/libcudart.so.12': '../wheels/nvidia/cuda_runtime/lib/libcudart.so.12',
        'lib64/libcudart.so': 'libcudart.so.12',
        'nvvm/libdevice': '../wheels/nvidia/cuda_nvcc/nvvm/libdevice',
    }
    assert ct.site_is_complete(str(home), plan, CU12['required'])
    create, remove, conflicts = ct.link_changes(str(home), str(site), plan, ct.managed_dirs(CU12))
    assert sorted(create) == sorted(plan) and remove == [] and conflicts == []
    ct.apply_links(str(home), create, remove)
    assert ct.missing_paths(str(home), CU12['required']) == []
    assert (home / 'include' / 'crt' / 'host_defines.h').read_text() == 'nvidia/cuda_nvcc/include/crt/host_defines.h'
    assert os.path.realpath(str(home / 'lib64' / 'libcudart.so')) == str(site / 'nvidia/cuda_runtime/lib/libcudart.so.12')
    # Applied: nothing left to do.
    assert ct.link_changes(str(home), str(site), plan, ct.managed_dirs(CU12)) == ({}, [], [])


def test_layout_repairs_links_removes_stale_ones_and_never_clobbers(tmp_path):
    home, site = tmp_path / 'cuda-12.8', tmp_path / 'cuda-12.8' / 'wheels'
    make_cu12_site(site)
    plan = ct.plan_links(str(home), str(site), CU12)
    ct.apply_links(str(home), plan, [])
    os.unlink(str(home / 'bin' / 'ptxas'))
    os.symlink('../wheels/nvidia/cuda_nvcc/bin/old-tool', str(home / 'bin' / 'old-tool'))
    (home / 'include' / 'cuda_runtime.h').unlink()
    (home / 'include' / 'cuda_runtime.h').write_text('local edit')
    create, remove, conflicts = ct.link_changes(str(home), str(site), plan, ct.managed_dirs(CU12))
    assert create == {'bin/ptxas': '../wheels/nvidia/cuda_nvcc/bin/ptxas'}
    assert remove == ['bin/old-tool']
    assert conflicts == ['include/cuda_runtime.h']


def test_site_incomplete_when_a_wheel_file_is_gone(tmp_path):
    home, site = tmp_path / 'cuda-12.8', tmp_path / 'cuda-12.8' / 'wheels'
    make_cu12_site(site)
    (site / 'nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc').unlink()
    plan = ct.plan_links(str(home), str(site), CU12)
    assert not ct.site_is_complete(str(home), plan, CU12['required'])
    assert ct.planned_source(str(home), plan, 'nvvm/libdevice/libdevice.10.bc') == str(
        site / 'nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc')
    assert ct.planned_source(str(home), plan, 'bin/nvcc') is None


def test_match_filters_entries(tmp_path):
    site = tmp_path / 'home' / 'wheels'
    for rel in ['nvidia/cu13/lib/libnvvm.so.4', 'nvidia/cu13/lib/libcudart.so.13']:
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text('')
    layout = {'merge': [{'dest': 'nvvm/lib64', 'from': ['nvidia/cu13/lib'], 'match': 'libnvvm.so*'}]}
    assert ct.plan_links(str(tmp_path / 'home'), str(site), layout) == {
        'nvvm/lib64/libnvvm.so.4': '../../wheels/nvidia/cu13/lib/libnvvm.so.4'}
