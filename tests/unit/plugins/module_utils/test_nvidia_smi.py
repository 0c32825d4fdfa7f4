# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import collections

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.gpu import nvidia_smi
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.nvidia_smi import (
    classify_link,
    parse_banner,
    parse_query_apps,
    parse_query_gpu,
    parse_topology,
    parse_version,
    strip_ansi,
)

H200_UUIDS = ['GPU-58ba15e6-1c11-a763-4606-42abd72ef835', 'GPU-7f957baf-af80-f04a-ee15-407804b1347d']
RTX_UUIDS = [
    'GPU-238bc380-400b-6d75-356a-b582145b0899', 'GPU-a0976474-ffc0-a3a1-44ac-464cc2fb6216',
    'GPU-ac155b50-e74c-e662-4ad3-54c0419a0e79', 'GPU-5c3797c7-7ca5-9654-1e38-3a02098c43f1',
    'GPU-8815d8f4-2038-11e7-5ec2-5355637570d9', 'GPU-f14d36c5-a3bc-36de-146b-b8568ef2a4d4',
    'GPU-fcfa8517-9bbb-9b8d-3704-61bb2bea774c', 'GPU-4e1e6558-63af-aaae-6050-f4abc6e8764e',
]
DRIVER_FAILED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                 "Make sure that the latest NVIDIA driver is installed and running.")


def test_every_fixture_directory_is_covered_here(fixture_systems):
    assert fixture_systems == ['a100x4_mixed', 'broken_driver', 'h200x2_nvlink', 'rtxpro6000x8_pcie']


def test_query_fields_match_capture_script(capture_script_query):
    assert ','.join(nvidia_smi.GPU_QUERY_FIELDS) == capture_script_query('q_gpu')


def test_strip_ansi():
    assert strip_ansi('\t\x1b[4mGPU0\tGPU1\x1b[0m\n') == '\tGPU0\tGPU1\n'
    assert strip_ansi('\x1b[1;4mGPU0\x1b[0m') == 'GPU0'


# --query-gpu

def test_query_gpu_h200(fixture_text):
    assert parse_query_gpu(fixture_text('h200x2_nvlink', 'query_gpu.csv')) == [
        {'index': 0, 'name': 'NVIDIA H200', 'uuid': H200_UUIDS[0], 'pci_bus_id': '00000000:00:06.0',
         'memory_total_mib': 143771, 'memory_used_mib': 4623, 'compute_capability': '9.0',
         'driver_version': '580.159.04'},
        {'index': 1, 'name': 'NVIDIA H200', 'uuid': H200_UUIDS[1], 'pci_bus_id': '00000000:00:07.0',
         'memory_total_mib': 143771, 'memory_used_mib': 1551, 'compute_capability': '9.0',
         'driver_version': '580.159.04'},
    ]


def test_query_gpu_rtxpro6000(fixture_text):
    gpus = parse_query_gpu(fixture_text('rtxpro6000x8_pcie', 'query_gpu.csv'))
    assert [g['index'] for g in gpus] == list(range(8))
    assert [g['uuid'] for g in gpus] == RTX_UUIDS
    assert set(g['name'] for g in gpus) == {'NVIDIA RTX PRO 6000 Blackwell Server Edition'}
    assert set(g['compute_capability'] for g in gpus) == {'12.0'}
    assert set(g['memory_total_mib'] for g in gpus) == {97887}
    assert set(g['driver_version'] for g in gpus) == {'580.95.05'}
    assert [g['pci_bus_id'] for g in gpus] == [
        '00000000:16:00.0', '00000000:1A:00.0', '00000000:38:00.0', '00000000:3C:00.0',
        '00000000:9A:00.0', '00000000:AB:00.0', '00000000:B8:00.0', '00000000:BC:00.0']
    assert gpus[0]['memory_used_mib'] == 86484


def test_query_gpu_a100(fixture_text):
    gpus = parse_query_gpu(fixture_text('a100x4_mixed', 'query_gpu.csv'))
    assert [(g['index'], g['name'], g['compute_capability'], g['memory_total_mib']) for g in gpus] == [
        (i, 'NVIDIA A100 80GB PCIe', '8.0', 81920) for i in range(4)]


def test_query_gpu_not_available_values():
    line = '0, NVIDIA H200, GPU-x, 00000000:00:06.0, [N/A], [N/A], [N/A], 580.159.04\n'
    gpu = parse_query_gpu(line)[0]
    assert (gpu['memory_total_mib'], gpu['memory_used_mib'], gpu['compute_capability']) == (None, None, None)


@pytest.mark.parametrize('text', [
    DRIVER_FAILED + '\n\n',
    'No devices were found\n',
    '0, NVIDIA H200, GPU-x, 00000000:00:06.0, 143771, 4623, 9.0\n',
    'x, NVIDIA H200, GPU-x, 00000000:00:06.0, 143771, 4623, 9.0, 580.159.04\n',
])
def test_query_gpu_rejects_other_output(text):
    with pytest.raises(ValueError):
        parse_query_gpu(text)


def test_query_gpu_broken_driver_fixture_is_rejected(fixture_text):
    with pytest.raises(ValueError):
        parse_query_gpu(fixture_text('broken_driver', 'query_gpu.csv'))


# --query-compute-apps

def test_query_apps_h200(fixture_text):
    uuids = {H200_UUIDS[0]: 0, H200_UUIDS[1]: 1}
    assert parse_query_apps(fixture_text('h200x2_nvlink', 'query_apps.csv'), uuids) == [
        {'gpu_index': 0, 'gpu_uuid': H200_UUIDS[0], 'pid': 562, 'name': 'python3', 'used_memory_mib': 4614},
        {'gpu_index': 1, 'gpu_uuid': H200_UUIDS[1], 'pid': 562, 'name': 'python3', 'used_memory_mib': 1542},
    ]


def test_query_apps_rtxpro6000_maps_uuid_to_index(fixture_text):
    # Deliberately not the identity order, so a positional mapping fails.
    uuids = dict((uuid, index) for index, uuid in enumerate(RTX_UUIDS))
    procs = parse_query_apps(fixture_text('rtxpro6000x8_pcie', 'query_apps.csv'), uuids)
    assert [(p['gpu_index'], p['pid'], p['used_memory_mib']) for p in procs] == [
        (0, 48213, 85914), (1, 48214, 85770), (2, 48216, 85772), (3, 48219, None),
        (4, 48221, 85768), (5, 48224, 85770), (6, 48226, 85766), (7, 48229, 85770)]
    assert set(p['name'] for p in procs) == {'python3'}
    assert [p['gpu_uuid'] for p in procs] == RTX_UUIDS


def test_query_apps_unknown_uuid_has_no_index():
    procs = parse_query_apps('MIG-0a1b, 77, python3, 100\n', {'GPU-a': 0})
    assert procs == [{'gpu_index': None, 'gpu_uuid': 'MIG-0a1b', 'pid': 77, 'name': 'python3', 'used_memory_mib': 100}]


def test_query_apps_empty(fixture_text):
    assert parse_query_apps(fixture_text('a100x4_mixed', 'query_apps.csv'), {}) == []


def test_query_apps_broken_driver_is_rejected(fixture_text):
    with pytest.raises(ValueError):
        parse_query_apps(fixture_text('broken_driver', 'query_apps.csv'), {})


# versions

@pytest.mark.parametrize('system, driver, cuda', [
    ('h200x2_nvlink', '580.159.04', '13.0'),
    ('rtxpro6000x8_pcie', '580.95.05', '13.0'),
    ('a100x4_mixed', '550.127.05', '12.4'),
])
def test_versions(fixture_text, system, driver, cuda):
    expected = {'driver_version': driver, 'cuda_driver_version': cuda}
    assert parse_version(fixture_text(system, 'version.txt')) == expected
    assert parse_banner(fixture_text(system, 'nvidia_smi.txt')) == expected


def test_versions_absent():
    empty = {'driver_version': '', 'cuda_driver_version': ''}
    assert parse_version(DRIVER_FAILED) == empty
    assert parse_banner(DRIVER_FAILED) == empty
    assert parse_version('NVIDIA-SMI version  : 470.256.02\n')['cuda_driver_version'] == ''


def test_banner_of_newer_drivers():
    line = '| NVIDIA-SMI 610.43.02              KMD Version: 610.43.02     CUDA UMD Version: 13.3     |\n'
    assert parse_banner(line) == {'driver_version': '610.43.02', 'cuda_driver_version': '13.3'}


# topology

@pytest.mark.parametrize('code, link_type, nvlinks', [
    ('NV18', 'nvlink', 18),
    ('NV12', 'nvlink', 12),
    ('NV1', 'nvlink', 1),
    ('NV', 'nvlink', None),
    ('PIX', 'pcie_switch', 0),
    ('PXB', 'pcie_switch', 0),
    ('PHB', 'host_bridge', 0),
    ('NODE', 'host_bridge', 0),
    ('SYS', 'cpu_interconnect', 0),
    ('SOC', 'cpu_interconnect', 0),
    ('X', 'unknown', 0),
    ('N/A', 'unknown', 0),
    ('NVX', 'unknown', 0),
    ('', 'unknown', 0),
])
def test_classify_link(code, link_type, nvlinks):
    assert classify_link(code) == (link_type, nvlinks)


def test_topology_h200(fixture_text):
    assert parse_topology(fixture_text('h200x2_nvlink', 'topo.txt')) == {
        'links': {(0, 1): 'NV18'}, 'numa': {0: 0, 1: 0}}


def test_topology_rtxpro6000(fixture_text):
    topo = parse_topology(fixture_text('rtxpro6000x8_pcie', 'topo.txt'))
    links = topo['links']
    assert sorted(links) == [(i, j) for i in range(8) for j in range(i + 1, 8)]
    assert len(links) == 28
    assert collections.Counter(links.values()) == {'SYS': 16, 'NODE': 8, 'PIX': 3, 'PXB': 1}
    # same PCIe switch, same NUMA node across switches, across NUMA nodes
    assert links[(0, 1)] == 'PIX'
    assert links[(2, 3)] == 'PIX'
    assert links[(6, 7)] == 'PIX'
    assert links[(4, 5)] == 'PXB'
    assert links[(0, 2)] == links[(1, 3)] == links[(4, 6)] == links[(5, 7)] == 'NODE'
    assert links[(0, 4)] == links[(3, 4)] == links[(0, 7)] == links[(3, 7)] == 'SYS'
    assert topo['numa'] == {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}


def test_topology_a100(fixture_text):
    assert parse_topology(fixture_text('a100x4_mixed', 'topo.txt')) == {
        'links': {(0, 1): 'NV12', (0, 2): 'SYS', (0, 3): 'SYS', (1, 2): 'SYS', (1, 3): 'SYS', (2, 3): 'NV12'},
        'numa': {0: 0, 1: 0, 2: 1, 3: 1},
    }


def test_topology_broken_driver_is_rejected(fixture_text):
    with pytest.raises(ValueError):
        parse_topology(fixture_text('broken_driver', 'topo.txt'))


def test_topology_whitespace_separated_copy():
    text = ('        GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID\n'
            'GPU0     X      NV4     PXB     0-31    0               N/A\n'
            'GPU1    NV4      X      PXB     0-31    0               N/A\n'
            'NIC0    PXB     PXB      X\n')
    assert parse_topology(text) == {'links': {(0, 1): 'NV4'}, 'numa': {0: 0, 1: 0}}


def test_topology_older_layout_with_device_named_nic_columns():
    # Drivers before the NIC legend named NIC columns after the device and had no GPU NUMA ID.
    text = ('\tGPU0\tGPU1\tGPU2\tmlx5_0\tCPU Affinity\tNUMA Affinity\n'
            'GPU0\t X \tPHB\tSYS\tPIX\t0-11\t0\n'
            'GPU1\tPHB\t X \tSYS\tPHB\t0-11\t0\n'
            'GPU2\tSYS\tSYS\t X \tSYS\t12-23\t1\n'
            'mlx5_0\tPIX\tPHB\tSYS\t X \t\t\n')
    assert parse_topology(text) == {
        'links': {(0, 1): 'PHB', (0, 2): 'SYS', (1, 2): 'SYS'}, 'numa': {0: 0, 1: 0, 2: 1}}


def test_topology_unknown_numa_affinity():
    text = '\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tSYS\t\tN/A\t\tN/A\nGPU1\tSYS\t X \t\tN/A\t\tN/A\n'
    assert parse_topology(text)['numa'] == {0: None, 1: None}


def test_topology_short_row_is_rejected():
    with pytest.raises(ValueError):
        parse_topology('\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \n')
