# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import collections
from types import SimpleNamespace

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.gpu import facts as gpu_facts
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.facts import (
    collect_gpu_facts,
    cuda_version_from_int,
    summarize,
)

SMI = '/usr/bin/nvidia-smi'
MIB = 1024 * 1024
H200_UUIDS = ['GPU-58ba15e6-1c11-a763-4606-42abd72ef835', 'GPU-7f957baf-af80-f04a-ee15-407804b1347d']
DRIVER_FAILED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                 "Make sure that the latest NVIDIA driver is installed and running.")


def no_pynvml():
    raise ImportError("No module named 'pynvml'")


def found(name):
    return SMI if name == 'nvidia-smi' else None


def missing(name):
    return None


class NVMLError(Exception):
    """Shaped like pynvml.NVMLError: str() gives the NVML message."""


class FakeNvml:
    """Just the pynvml surface gpu_facts uses, with the real names and constants."""

    NVMLError = NVMLError
    NVML_P2P_CAPS_INDEX_NVLINK = 2
    NVML_P2P_STATUS_OK = 0
    NVML_P2P_STATUS_NOT_SUPPORTED = 5

    def __init__(self, devices, nvlink_pairs=(), ancestors=None, process_names=None, init_error=None,
                 count_error=None, cuda=13000, driver='580.159.04'):
        self.devices = devices
        self.nvlink_pairs = set(frozenset(p) for p in nvlink_pairs)
        self.ancestors = ancestors or {}
        self.process_names = process_names or {}
        self.init_error = init_error
        self.count_error = count_error
        self.cuda = cuda
        self.driver = driver
        self.calls = []

    def _record(self, name):
        self.calls.append(name)

    def nvmlInit(self):
        self._record('nvmlInit')
        if self.init_error:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self):
        self._record('nvmlShutdown')

    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self.cuda

    def nvmlDeviceGetCount(self):
        if self.count_error:
            raise NVMLError(self.count_error)
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        return ('handle', index)

    def _dev(self, handle):
        assert handle[0] == 'handle'
        return self.devices[handle[1]]

    def nvmlDeviceGetName(self, handle):
        return self._dev(handle)['name']

    def nvmlDeviceGetUUID(self, handle):
        return self._dev(handle)['uuid']

    def nvmlDeviceGetPciInfo(self, handle):
        return SimpleNamespace(busId=self._dev(handle)['bus'], busIdLegacy=b'legacy-not-used')

    nvmlMemory_v2 = 0x02000028  # real value; the fake only checks identity

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        dev = self._dev(handle)
        reserved = dev.get('reserved', 0)
        free = dev['total'] - dev['used'] - reserved
        if version is None:
            return SimpleNamespace(total=dev['total'], used=dev['used'] + reserved, free=free)
        assert version == self.nvmlMemory_v2
        return SimpleNamespace(total=dev['total'], reserved=reserved, used=dev['used'], free=free)

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return self._dev(handle)['cc']

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        procs = self._dev(handle).get('procs')
        if isinstance(procs, Exception):
            raise procs
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in procs or ()]

    def nvmlSystemGetProcessName(self, pid):
        if pid not in self.process_names:
            raise NVMLError('Not Found')
        return self.process_names[pid]

    def nvmlDeviceGetP2PStatus(self, first, second, p2p_index):
        assert p2p_index == self.NVML_P2P_CAPS_INDEX_NVLINK
        if frozenset((first[1], second[1])) in self.nvlink_pairs:
            return self.NVML_P2P_STATUS_OK
        return self.NVML_P2P_STATUS_NOT_SUPPORTED

    def nvmlDeviceGetTopologyCommonAncestor(self, first, second):
        level = self.ancestors.get((first[1], second[1]), 50)
        if isinstance(level, Exception):
            raise level
        return level


def h200_nvml(**kwargs):
    devices = [
        {'name': 'NVIDIA H200', 'uuid': H200_UUIDS[0], 'bus': '00000000:00:06.0', 'total': 143771 * MIB,
         'used': 4623 * MIB, 'cc': (9, 0), 'procs': [(562, 4614 * MIB)]},
        # older nvidia-ml-py releases return bytes
        {'name': b'NVIDIA H200', 'uuid': H200_UUIDS[1].encode(), 'bus': b'00000000:00:07.0', 'total': 143771 * MIB,
         'used': 1551 * MIB, 'cc': (9, 0), 'procs': [(562, 1542 * MIB)]},
    ]
    # As seen on the real host: NVLink P2P OK while the common ancestor says HOSTBRIDGE.
    kwargs.setdefault('ancestors', {(0, 1): 30})
    kwargs.setdefault('process_names', {562: 'python3'})
    return FakeNvml(devices, nvlink_pairs=[(0, 1)], **kwargs)


def run_never(argv, **kwargs):
    raise AssertionError('unexpected command %r' % (argv,))


# nvidia-smi backend, one test per recorded host

def test_smi_h200_exact(smi_replay):
    replay = smi_replay('h200x2_nvlink')
    facts = collect_gpu_facts(replay, found, import_nvml=no_pynvml)
    assert facts == {
        'backend': 'nvidia-smi',
        'count': 2,
        'reason': '',
        'driver_version': '580.159.04',
        'cuda_driver_version': '13.0',
        'gpus': [
            {'index': 0, 'name': 'NVIDIA H200', 'uuid': H200_UUIDS[0], 'pci_bus_id': '00000000:00:06.0',
             'memory_total_mib': 143771, 'memory_used_mib': 4623, 'compute_capability': '9.0', 'numa_node': 0},
            {'index': 1, 'name': 'NVIDIA H200', 'uuid': H200_UUIDS[1], 'pci_bus_id': '00000000:00:07.0',
             'memory_total_mib': 143771, 'memory_used_mib': 1551, 'compute_capability': '9.0', 'numa_node': 0},
        ],
        'processes': [
            {'gpu_index': 0, 'gpu_uuid': H200_UUIDS[0], 'pid': 562, 'name': 'python3', 'used_memory_mib': 4614},
            {'gpu_index': 1, 'gpu_uuid': H200_UUIDS[1], 'pid': 562, 'name': 'python3', 'used_memory_mib': 1542},
        ],
        'topology': {
            'summary': 'nvlink',
            'legend_source': 'nvidia-smi',
            'pairs': [{'gpus': [0, 1], 'link': 'NV18', 'type': 'nvlink', 'nvlinks': 18}],
        },
    }
    # The CUDA version came from --version, so the plain banner was never needed.
    assert not replay.ran('nvidia_smi.txt')


def test_smi_rtxpro6000(smi_replay):
    facts = collect_gpu_facts(smi_replay('rtxpro6000x8_pcie'), found, import_nvml=no_pynvml)
    assert (facts['backend'], facts['count'], facts['reason']) == ('nvidia-smi', 8, '')
    assert (facts['driver_version'], facts['cuda_driver_version']) == ('580.95.05', '13.0')
    assert set(g['compute_capability'] for g in facts['gpus']) == {'12.0'}
    assert [g['numa_node'] for g in facts['gpus']] == [0, 0, 0, 0, 1, 1, 1, 1]

    topo = facts['topology']
    assert topo['summary'] == 'pcie'
    assert topo['legend_source'] == 'nvidia-smi'
    assert len(topo['pairs']) == 28
    types = dict((tuple(p['gpus']), p['type']) for p in topo['pairs'])
    assert types[(0, 1)] == 'pcie_switch'        # PIX, same switch
    assert types[(4, 5)] == 'pcie_switch'        # PXB
    assert types[(0, 2)] == 'host_bridge'        # NODE, same NUMA node
    assert types[(5, 7)] == 'host_bridge'
    assert types[(0, 4)] == 'cpu_interconnect'   # SYS, across NUMA nodes
    assert types[(3, 4)] == 'cpu_interconnect'
    assert all(types[(i, j)] == 'cpu_interconnect' for i in range(4) for j in range(4, 8))
    assert collections.Counter(types.values()) == {'cpu_interconnect': 16, 'host_bridge': 8, 'pcie_switch': 4}
    assert set(p['nvlinks'] for p in topo['pairs']) == {0}

    procs = facts['processes']
    assert [(p['gpu_index'], p['pid']) for p in procs] == list(zip(range(8), [
        48213, 48214, 48216, 48219, 48221, 48224, 48226, 48229]))
    assert [p['gpu_uuid'] for p in procs] == [g['uuid'] for g in facts['gpus']]
    assert procs[3]['used_memory_mib'] is None
    assert procs[0]['used_memory_mib'] == 85914


def test_smi_a100_mixed(smi_replay):
    facts = collect_gpu_facts(smi_replay('a100x4_mixed'), found, import_nvml=no_pynvml)
    assert (facts['count'], facts['driver_version'], facts['cuda_driver_version']) == (4, '550.127.05', '12.4')
    assert facts['processes'] == []
    topo = facts['topology']
    assert topo['summary'] == 'mixed'
    assert len(topo['pairs']) == 6
    assert [p for p in topo['pairs'] if p['type'] == 'nvlink'] == [
        {'gpus': [0, 1], 'link': 'NV12', 'type': 'nvlink', 'nvlinks': 12},
        {'gpus': [2, 3], 'link': 'NV12', 'type': 'nvlink', 'nvlinks': 12},
    ]
    assert set(p['link'] for p in topo['pairs'] if p['type'] != 'nvlink') == {'SYS'}


def test_smi_broken_driver(smi_replay):
    facts = collect_gpu_facts(smi_replay('broken_driver'), found, import_nvml=no_pynvml)
    assert facts == gpu_facts.empty_facts(facts['reason'])
    assert (facts['backend'], facts['count']) == ('none', 0)
    assert facts['reason'].startswith("NVML: pynvml (nvidia-ml-py) not importable: No module named 'pynvml'; nvidia-smi: ")
    assert 'exited with code 9' in facts['reason']
    assert DRIVER_FAILED in facts['reason']


# nvidia-smi: partial failures

def test_smi_cuda_version_falls_back_to_banner(smi_replay):
    replay = smi_replay('h200x2_nvlink', overrides={'version.txt': (0, 'NVIDIA-SMI version  : 580.159.04\n')})
    facts = collect_gpu_facts(replay, found, import_nvml=no_pynvml)
    assert facts['cuda_driver_version'] == '13.0'
    assert replay.ran('nvidia_smi.txt')


def test_smi_topology_failure_is_a_warning(smi_replay):
    warnings = []
    replay = smi_replay('rtxpro6000x8_pcie', overrides={'topo.txt': (3, 'topology not supported\n')})
    facts = collect_gpu_facts(replay, found, import_nvml=no_pynvml, warn=warnings.append)
    assert facts['count'] == 8
    assert facts['topology'] == {'summary': 'unknown', 'pairs': [], 'legend_source': 'none'}
    assert set(g['numa_node'] for g in facts['gpus']) == {None}
    assert len(warnings) == 1
    assert 'topo -m' in warnings[0] and 'topology not supported' in warnings[0]


def test_smi_incomplete_topology_is_unknown(smi_replay, fixture_text):
    truncated = '\n'.join(fixture_text('a100x4_mixed', 'topo.txt').splitlines()[:3]) + '\n'
    warnings = []
    facts = collect_gpu_facts(smi_replay('a100x4_mixed', overrides={'topo.txt': (0, truncated)}), found,
                              import_nvml=no_pynvml, warn=warnings.append)
    assert facts['topology']['summary'] == 'unknown'
    assert len(facts['topology']['pairs']) == 5
    assert any('5 of 6' in w for w in warnings)


def test_smi_process_failure_is_a_warning(smi_replay):
    warnings = []
    replay = smi_replay('h200x2_nvlink', overrides={'query_apps.csv': (15, 'Insufficient Permissions\n')})
    facts = collect_gpu_facts(replay, found, import_nvml=no_pynvml, warn=warnings.append)
    assert facts['count'] == 2 and facts['processes'] == []
    assert any('query-compute-apps' in w and 'Insufficient Permissions' in w for w in warnings)


def test_smi_no_devices(smi_replay):
    replay = smi_replay('h200x2_nvlink', overrides={'query_gpu.csv': (6, 'No devices were found\n')})
    facts = collect_gpu_facts(replay, found, import_nvml=no_pynvml)
    assert (facts['backend'], facts['count']) == ('none', 0)
    assert 'exited with code 6: No devices were found' in facts['reason']


def test_smi_unparseable_query(smi_replay):
    replay = smi_replay('h200x2_nvlink', overrides={'query_gpu.csv': (0, 'garbage\n')})
    facts = collect_gpu_facts(replay, found, import_nvml=no_pynvml)
    assert facts['backend'] == 'none'
    assert 'cannot parse --query-gpu output' in facts['reason']


def test_smi_missing_and_no_pynvml():
    facts = collect_gpu_facts(run_never, missing, import_nvml=no_pynvml)
    assert (facts['backend'], facts['count']) == ('none', 0)
    assert facts['reason'] == ("NVML: pynvml (nvidia-ml-py) not importable: No module named 'pynvml'; "
                               "nvidia-smi: not found (looked for nvidia-smi in PATH)")


def test_explicit_smi_path_is_looked_up(smi_replay):
    looked = []

    def finder(name):
        looked.append(name)
        return '/opt/nv/nvidia-smi' if name == '/opt/nv/nvidia-smi' else None

    replay = smi_replay('h200x2_nvlink', path='/opt/nv/nvidia-smi')
    facts = collect_gpu_facts(replay, finder, backend='nvidia-smi', nvidia_smi_path='/opt/nv/nvidia-smi')
    assert facts['count'] == 2
    assert set(looked) == {'/opt/nv/nvidia-smi'}

    facts = collect_gpu_facts(run_never, missing, backend='nvidia-smi', nvidia_smi_path='/nope/nvidia-smi')
    assert facts['reason'] == 'nvidia-smi: not found (looked for /nope/nvidia-smi)'


# NVML backend

def test_nvml_h200_without_nvidia_smi():
    nv = h200_nvml()
    facts = collect_gpu_facts(run_never, missing, import_nvml=lambda: nv)
    assert facts == {
        'backend': 'nvml',
        'count': 2,
        'reason': '',
        'driver_version': '580.159.04',
        'cuda_driver_version': '13.0',
        'gpus': [
            {'index': 0, 'name': 'NVIDIA H200', 'uuid': H200_UUIDS[0], 'pci_bus_id': '00000000:00:06.0',
             'memory_total_mib': 143771, 'memory_used_mib': 4623, 'compute_capability': '9.0', 'numa_node': None},
            {'index': 1, 'name': 'NVIDIA H200', 'uuid': H200_UUIDS[1], 'pci_bus_id': '00000000:00:07.0',
             'memory_total_mib': 143771, 'memory_used_mib': 1551, 'compute_capability': '9.0', 'numa_node': None},
        ],
        'processes': [
            {'gpu_index': 0, 'gpu_uuid': H200_UUIDS[0], 'pid': 562, 'name': 'python3', 'used_memory_mib': 4614},
            {'gpu_index': 1, 'gpu_uuid': H200_UUIDS[1], 'pid': 562, 'name': 'python3', 'used_memory_mib': 1542},
        ],
        'topology': {
            'summary': 'nvlink',
            'legend_source': 'nvml',
            'pairs': [{'gpus': [0, 1], 'link': 'NV', 'type': 'nvlink', 'nvlinks': None}],
        },
    }
    assert nv.calls == ['nvmlInit', 'nvmlShutdown']


def test_nvml_memory_used_excludes_driver_reservation():
    nv = h200_nvml()
    for dev in nv.devices:
        dev['reserved'] = 615 * MIB
    facts = collect_gpu_facts(run_never, missing, import_nvml=lambda: nv)
    assert [g['memory_used_mib'] for g in facts['gpus']] == [4623, 1551]

    # pynvml without memory v2 only has the v1 view
    nv.nvmlMemory_v2 = None
    facts = collect_gpu_facts(run_never, missing, import_nvml=lambda: nv)
    assert [g['memory_used_mib'] for g in facts['gpus']] == [4623 + 615, 1551 + 615]


def test_nvml_with_nvidia_smi_takes_topology_from_smi(smi_replay):
    nv = h200_nvml()
    replay = smi_replay('h200x2_nvlink')
    facts = collect_gpu_facts(replay, found, import_nvml=lambda: nv)
    assert facts['backend'] == 'nvml'
    assert facts['topology'] == {
        'summary': 'nvlink', 'legend_source': 'nvidia-smi',
        'pairs': [{'gpus': [0, 1], 'link': 'NV18', 'type': 'nvlink', 'nvlinks': 18}]}
    assert [g['numa_node'] for g in facts['gpus']] == [0, 0]
    assert [call[1:] for call in replay.calls] == [['topo', '-m']]


def test_nvml_falls_back_to_nvml_topology_when_topo_fails(smi_replay):
    replay = smi_replay('h200x2_nvlink', overrides={'topo.txt': (1, 'boom\n')})
    facts = collect_gpu_facts(replay, found, import_nvml=h200_nvml, warn=lambda msg: None)
    assert facts['topology']['legend_source'] == 'nvml'
    assert facts['topology']['summary'] == 'nvlink'


@pytest.mark.parametrize('level, link, link_type', [
    (0, 'PIX', 'pcie_switch'),         # NVML_TOPOLOGY_INTERNAL
    (10, 'PIX', 'pcie_switch'),        # NVML_TOPOLOGY_SINGLE
    (20, 'PXB', 'pcie_switch'),        # NVML_TOPOLOGY_MULTIPLE
    (30, 'PHB', 'host_bridge'),        # NVML_TOPOLOGY_HOSTBRIDGE
    (40, 'NODE', 'host_bridge'),       # NVML_TOPOLOGY_NODE
    (50, 'SYS', 'cpu_interconnect'),   # NVML_TOPOLOGY_SYSTEM
    (60, 'N/A', 'unknown'),
    (NVMLError('Not Supported'), 'N/A', 'unknown'),
])
def test_nvml_common_ancestor_classification(level, link, link_type):
    devices = [dict(h200_nvml().devices[0], procs=[]), dict(h200_nvml().devices[0], procs=[])]
    nv = FakeNvml(devices, ancestors={(0, 1): level})
    facts = collect_gpu_facts(run_never, missing, import_nvml=lambda: nv)
    assert facts['topology']['pairs'] == [{'gpus': [0, 1], 'link': link, 'type': link_type, 'nvlinks': 0}]
    assert facts['topology']['summary'] == ('unknown' if link_type == 'unknown' else 'pcie')


def test_nvml_mixed_topology():
    dev = dict(h200_nvml().devices[0], procs=[])
    nv = FakeNvml([dev] * 4, nvlink_pairs=[(0, 1), (2, 3)], ancestors={(0, 1): 40, (2, 3): 40})
    facts = collect_gpu_facts(run_never, missing, import_nvml=lambda: nv)
    assert facts['topology']['summary'] == 'mixed'
    assert [(p['gpus'], p['type']) for p in facts['topology']['pairs']] == [
        ([0, 1], 'nvlink'), ([0, 2], 'cpu_interconnect'), ([0, 3], 'cpu_interconnect'),
        ([1, 2], 'cpu_interconnect'), ([1, 3], 'cpu_interconnect'), ([2, 3], 'nvlink')]


def test_nvml_process_details():
    nv = h200_nvml(process_names={})
    nv.devices[0]['procs'] = [(562, None), (777, 2 ** 64 - 1)]
    nv.devices[1]['procs'] = NVMLError('Not Supported')
    comm = {'/proc/562/comm': 'python3\n'}

    def read_file(path):
        if path not in comm:
            raise IOError(2, 'No such file or directory', path)
        return comm[path]

    warnings = []
    facts = collect_gpu_facts(run_never, missing, import_nvml=lambda: nv, read_file=read_file, warn=warnings.append)
    assert facts['processes'] == [
        {'gpu_index': 0, 'gpu_uuid': H200_UUIDS[0], 'pid': 562, 'name': 'python3', 'used_memory_mib': None},
        {'gpu_index': 0, 'gpu_uuid': H200_UUIDS[0], 'pid': 777, 'name': '', 'used_memory_mib': None},
    ]
    assert any('GPU 1' in w and 'Not Supported' in w for w in warnings)


@pytest.mark.parametrize('value, text', [(13000, '13.0'), (12040, '12.4'), (12020, '12.2'), (11080, '11.8')])
def test_cuda_version_from_int(value, text):
    assert cuda_version_from_int(value) == text


def test_nvml_cuda_version_v1_fallback():
    nv = h200_nvml(cuda=12040)
    nv.nvmlSystemGetCudaDriverVersion = nv.nvmlSystemGetCudaDriverVersion_v2
    nv.nvmlSystemGetCudaDriverVersion_v2 = None
    facts = collect_gpu_facts(run_never, missing, import_nvml=lambda: nv)
    assert facts['cuda_driver_version'] == '12.4'


# fall-back between backends

def test_nvml_init_failure_falls_back_to_smi(smi_replay):
    nv = h200_nvml(init_error='Driver Not Loaded')
    facts = collect_gpu_facts(smi_replay('a100x4_mixed'), found, import_nvml=lambda: nv)
    assert (facts['backend'], facts['count'], facts['reason']) == ('nvidia-smi', 4, '')
    assert nv.calls == ['nvmlInit']


def test_nvml_init_failure_and_broken_driver(smi_replay):
    nv = h200_nvml(init_error='Driver Not Loaded')
    facts = collect_gpu_facts(smi_replay('broken_driver'), found, import_nvml=lambda: nv)
    assert (facts['backend'], facts['count']) == ('none', 0)
    nvml_part, smi_part = facts['reason'].split('; ', 1)
    assert nvml_part == 'NVML: nvmlInit failed: Driver Not Loaded'
    assert smi_part.startswith('nvidia-smi: `/usr/bin/nvidia-smi --query-gpu=')
    assert smi_part.endswith('exited with code 9: ' + DRIVER_FAILED)


def test_nvml_failure_after_init_falls_back_and_shuts_down(smi_replay):
    nv = h200_nvml(count_error='GPU is lost')
    facts = collect_gpu_facts(smi_replay('h200x2_nvlink'), found, import_nvml=lambda: nv)
    assert facts['backend'] == 'nvidia-smi'
    assert nv.calls == ['nvmlInit', 'nvmlShutdown']


def test_backend_nvml_only_never_runs_smi():
    facts = collect_gpu_facts(run_never, found, backend='nvml', import_nvml=no_pynvml)
    assert facts['backend'] == 'none'
    assert facts['reason'] == "NVML: pynvml (nvidia-ml-py) not importable: No module named 'pynvml'"


def test_backend_smi_only_never_imports_pynvml(smi_replay):
    def forbidden():
        raise AssertionError('pynvml imported')

    facts = collect_gpu_facts(smi_replay('h200x2_nvlink'), found, backend='nvidia-smi', import_nvml=forbidden)
    assert facts['backend'] == 'nvidia-smi'


def test_bad_backend_name():
    with pytest.raises(ValueError):
        collect_gpu_facts(run_never, missing, backend='cuda')


def test_nvml_zero_gpus():
    facts = collect_gpu_facts(run_never, missing, import_nvml=lambda: FakeNvml([]))
    assert (facts['backend'], facts['count'], facts['reason']) == ('nvml', 0, 'nvml reported no GPUs')
    assert facts['topology']['summary'] == 'none'


@pytest.mark.parametrize('count, types, expected', [
    (0, [], 'none'),
    (1, [], 'single'),
    (2, ['nvlink'], 'nvlink'),
    (2, ['pcie_switch'], 'pcie'),
    (3, ['nvlink', 'nvlink', 'nvlink'], 'nvlink'),
    (3, ['host_bridge', 'cpu_interconnect', 'pcie_switch'], 'pcie'),
    (3, ['nvlink', 'cpu_interconnect', 'cpu_interconnect'], 'mixed'),
    (3, ['nvlink', 'unknown', 'nvlink'], 'mixed'),
    (3, ['pcie_switch', 'unknown', 'pcie_switch'], 'unknown'),
    (3, ['nvlink', 'nvlink'], 'unknown'),  # a pair is missing
])
def test_summarize(count, types, expected):
    pairs = [{'type': link_type} for link_type in types]
    assert summarize(count, pairs, count * (count - 1) // 2) == expected


def test_nvml_single_gpu():
    nv = h200_nvml()
    nv.devices = nv.devices[:1]
    facts = collect_gpu_facts(run_never, missing, import_nvml=lambda: nv)
    assert (facts['count'], facts['reason']) == (1, '')
    assert facts['topology'] == {'summary': 'single', 'pairs': [], 'legend_source': 'none'}
