# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Collect NVIDIA GPU facts through NVML (nvidia-ml-py) or nvidia-smi.

Everything that touches the host (running a command, locating a binary,
importing pynvml, reading /proc) is passed in, so the logic runs in unit tests
against recorded nvidia-smi output and a fake pynvml.
"""

from __future__ import annotations

from ansible_collections.inferops.gpu.plugins.module_utils.gpu.nvidia_smi import (
    APPS_QUERY_FIELDS,
    GPU_QUERY_FIELDS,
    classify_link,
    parse_banner,
    parse_query_apps,
    parse_query_gpu,
    parse_topology,
    parse_version,
)

BACKENDS = ('auto', 'nvml', 'nvidia-smi')
MIB = 1024 * 1024

# nvmlGpuTopologyLevel_t values, expressed as the `topo -m` code with the same
# meaning so both sources share one classification.
NVML_ANCESTOR_CODES = {0: 'PIX', 10: 'PIX', 20: 'PXB', 30: 'PHB', 40: 'NODE', 50: 'SYS'}
# pynvml hands back NVML_VALUE_NOT_AVAILABLE unconverted in some releases.
_NVML_NOT_AVAILABLE = 2 ** 64 - 1


class BackendUnavailable(Exception):
    """A backend (or one nvidia-smi call) could not deliver; the text says why."""


def empty_facts(reason=''):
    return {
        'backend': 'none',
        'count': 0,
        'reason': reason,
        'driver_version': '',
        'cuda_driver_version': '',
        'gpus': [],
        'processes': [],
        'topology': {'summary': 'none', 'pairs': [], 'legend_source': 'none'},
    }


def import_pynvml():
    import pynvml
    return pynvml


def read_text_file(path):
    with open(path) as handle:
        return handle.read()


def _text(value):
    return value.decode('utf-8', 'replace') if isinstance(value, bytes) else str(value)


def cuda_version_from_int(value):
    """NVML encodes CUDA 13.0 as 13000 and 12.4 as 12040."""
    return '%d.%d' % (value // 1000, value % 1000 // 10)


def build_pairs(links):
    pairs = []
    for (low, high), code in sorted(links.items()):
        link_type, nvlinks = classify_link(code)
        pairs.append({'gpus': [low, high], 'link': code, 'type': link_type, 'nvlinks': nvlinks})
    return pairs


def summarize(count, pairs, expected_pairs):
    if count == 0:
        return 'none'
    if count == 1:
        return 'single'
    if len(pairs) != expected_pairs:
        return 'unknown'
    types = set(pair['type'] for pair in pairs)
    if types == {'nvlink'}:
        return 'nvlink'
    if 'nvlink' in types:
        return 'mixed'
    # An unclassified pair might be a link kind this code does not know yet.
    return 'unknown' if 'unknown' in types else 'pcie'


class GpuFactsCollector:
    """One probe of one host.

    run_command(argv) -> (rc, stdout, stderr), as AnsibleModule.run_command.
    find_binary(name_or_path) -> path or None, as AnsibleModule.get_bin_path.
    import_nvml() -> pynvml module, raising ImportError when absent.
    read_file(path) -> str, raising OSError.
    warn(msg) for problems that do not stop collection.
    """

    def __init__(self, run_command, find_binary, import_nvml=None, read_file=None, warn=None, nvidia_smi_path=None):
        self.run_command = run_command
        self.find_binary = find_binary
        self.import_nvml = import_nvml or import_pynvml
        self.read_file = read_file or read_text_file
        self.warn = warn or (lambda msg: None)
        self.nvidia_smi_path = nvidia_smi_path
        self._smi = None
        self._smi_looked = False

    def collect(self, backend='auto'):
        if backend not in BACKENDS:
            raise ValueError('backend must be one of %s' % ', '.join(BACKENDS))
        tried = []
        attempts = []
        if backend in ('auto', 'nvml'):
            attempts.append(('NVML', self._collect_nvml))
        if backend in ('auto', 'nvidia-smi'):
            attempts.append(('nvidia-smi', self._collect_smi))
        for label, attempt in attempts:
            try:
                return attempt()
            except BackendUnavailable as exc:
                tried.append('%s: %s' % (label, exc))
        return empty_facts('; '.join(tried))

    # nvidia-smi plumbing

    def smi_path(self):
        if not self._smi_looked:
            self._smi = self.find_binary(self.nvidia_smi_path or 'nvidia-smi')
            self._smi_looked = True
        return self._smi

    def run_smi(self, *args):
        path = self.smi_path()
        if not path:
            where = self.nvidia_smi_path or 'nvidia-smi in PATH'
            raise BackendUnavailable('not found (looked for %s)' % where)
        argv = [path] + list(args)
        rc, out, err = self.run_command(argv)
        if rc != 0:
            message = ' '.join((_text(out).strip() + ' ' + _text(err).strip()).split())
            raise BackendUnavailable('`%s` exited with code %s: %s' % (' '.join(argv), rc, message or 'no output'))
        return _text(out)

    def _collect_smi(self):
        out = self.run_smi('--query-gpu=' + ','.join(GPU_QUERY_FIELDS), '--format=csv,noheader,nounits')
        try:
            gpus = parse_query_gpu(out)
        except ValueError as exc:
            raise BackendUnavailable('cannot parse --query-gpu output: %s' % exc)
        driver = gpus[0]['driver_version'] if gpus else ''
        for gpu in gpus:
            del gpu['driver_version']
        facts = self._facts('nvidia-smi', gpus, driver, self._smi_cuda_version())
        try:
            apps = self.run_smi('--query-compute-apps=' + ','.join(APPS_QUERY_FIELDS), '--format=csv,noheader,nounits')
            facts['processes'] = parse_query_apps(apps, dict((g['uuid'], g['index']) for g in gpus))
        except (BackendUnavailable, ValueError) as exc:
            self.warn('nvidia-smi --query-compute-apps: %s' % exc)
        facts['topology'] = self._topology(gpus)
        return facts

    def _smi_cuda_version(self):
        # `--version` has the CUDA line only on recent drivers; the banner of
        # plain nvidia-smi has had it for much longer.
        for args, parser in ((('--version',), parse_version), ((), parse_banner)):
            try:
                version = parser(self.run_smi(*args))['cuda_driver_version']
            except BackendUnavailable:
                continue
            if version:
                return version
        return ''

    def _topology(self, gpus, nvml_links=None):
        links = None
        numa = {}
        source = 'none'
        if gpus and self.smi_path():
            try:
                parsed = parse_topology(self.run_smi('topo', '-m'))
                links, numa, source = parsed['links'], parsed['numa'], 'nvidia-smi'
            except (BackendUnavailable, ValueError) as exc:
                self.warn('nvidia-smi topo -m: %s' % exc)
        if links is None and nvml_links is not None and len(gpus) > 1:
            links, source = nvml_links(), 'nvml'
        indices = [gpu['index'] for gpu in gpus]
        for gpu in gpus:
            gpu['numa_node'] = numa.get(gpu['index'])
        wanted = set((i, j) for i in indices for j in indices if i < j)
        pairs = build_pairs(dict((k, v) for k, v in (links or {}).items() if k in wanted))
        summary = summarize(len(gpus), pairs, len(wanted))
        if links is not None and len(pairs) != len(wanted):
            self.warn('GPU topology incomplete: %d of %d GPU pairs classified' % (len(pairs), len(wanted)))
        return {'summary': summary, 'pairs': pairs, 'legend_source': source}

    @staticmethod
    def _facts(backend, gpus, driver, cuda):
        facts = empty_facts('' if gpus else '%s reported no GPUs' % backend)
        facts.update(backend=backend, count=len(gpus), gpus=gpus, driver_version=driver, cuda_driver_version=cuda)
        return facts

    # NVML

    def _collect_nvml(self):
        try:
            nv = self.import_nvml()
        except ImportError as exc:
            raise BackendUnavailable('pynvml (nvidia-ml-py) not importable: %s' % exc)
        try:
            nv.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            raise BackendUnavailable('nvmlInit failed: %s' % (str(exc) or type(exc).__name__))
        try:
            return self._nvml_facts(nv)
        except Exception as exc:  # a half-working driver must not crash the probe
            raise BackendUnavailable('%s: %s' % (type(exc).__name__, exc))
        finally:
            try:
                nv.nvmlShutdown()
            except Exception:
                pass

    def _nvml_facts(self, nv):
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
        gpus = []
        for index, handle in enumerate(handles):
            memory = _nvml_memory(nv, handle)
            gpus.append({
                'index': index,
                'name': _text(nv.nvmlDeviceGetName(handle)),
                'uuid': _text(nv.nvmlDeviceGetUUID(handle)),
                'pci_bus_id': _text(nv.nvmlDeviceGetPciInfo(handle).busId),
                'memory_total_mib': memory.total // MIB,
                'memory_used_mib': memory.used // MIB,
                'compute_capability': '%d.%d' % tuple(nv.nvmlDeviceGetCudaComputeCapability(handle)),
            })
        facts = self._facts('nvml', gpus, _text(nv.nvmlSystemGetDriverVersion()), self._nvml_cuda_version(nv))
        facts['processes'] = self._nvml_processes(nv, gpus, handles)
        facts['topology'] = self._topology(gpus, lambda: self._nvml_links(nv, handles))
        return facts

    def _nvml_cuda_version(self, nv):
        getter = getattr(nv, 'nvmlSystemGetCudaDriverVersion_v2', None) or nv.nvmlSystemGetCudaDriverVersion
        try:
            return cuda_version_from_int(getter())
        except nv.NVMLError as exc:
            self.warn('NVML CUDA driver version: %s' % exc)
            return ''

    def _nvml_processes(self, nv, gpus, handles):
        processes = []
        for gpu, handle in zip(gpus, handles):
            try:
                running = nv.nvmlDeviceGetComputeRunningProcesses(handle)
            except nv.NVMLError as exc:
                self.warn('NVML processes of GPU %d: %s' % (gpu['index'], exc))
                continue
            for proc in running:
                used = getattr(proc, 'usedGpuMemory', None)
                processes.append({
                    'gpu_index': gpu['index'],
                    'gpu_uuid': gpu['uuid'],
                    'pid': int(proc.pid),
                    'name': self._process_name(nv, int(proc.pid)),
                    'used_memory_mib': None if used is None or used >= _NVML_NOT_AVAILABLE else used // MIB,
                })
        return processes

    def _process_name(self, nv, pid):
        try:
            return _text(nv.nvmlSystemGetProcessName(pid))
        except nv.NVMLError:
            pass
        # NVML cannot resolve pids outside its pid namespace; /proc may still.
        try:
            return self.read_file('/proc/%d/comm' % pid).strip()
        except (IOError, OSError):
            return ''

    @staticmethod
    def _nvml_links(nv, handles):
        links = {}
        for low in range(len(handles)):
            for high in range(low + 1, len(handles)):
                links[(low, high)] = _nvml_link_code(nv, handles[low], handles[high])
        return links


def _nvml_memory(nv, handle):
    # Memory v1 counts the driver's reservation as used (615 MiB on an idle
    # H200); v2 does not, and matches what nvidia-smi prints.
    version = getattr(nv, 'nvmlMemory_v2', None)
    if version is not None:
        try:
            return nv.nvmlDeviceGetMemoryInfo(handle, version=version)
        except (nv.NVMLError, TypeError):
            pass
    return nv.nvmlDeviceGetMemoryInfo(handle)


def _nvml_link_code(nv, first, second):
    # NVLink first: on NVLink hosts the common ancestor still reports the PCIe
    # path (HOSTBRIDGE for the NV18 pair of an H200 host), not the NVLink.
    try:
        if nv.nvmlDeviceGetP2PStatus(first, second, nv.NVML_P2P_CAPS_INDEX_NVLINK) == nv.NVML_P2P_STATUS_OK:
            return 'NV'
    except nv.NVMLError:
        pass
    try:
        return NVML_ANCESTOR_CODES.get(nv.nvmlDeviceGetTopologyCommonAncestor(first, second), 'N/A')
    except nv.NVMLError:
        return 'N/A'


def collect_gpu_facts(run_command, find_binary, backend='auto', nvidia_smi_path=None,
                      import_nvml=None, read_file=None, warn=None):
    collector = GpuFactsCollector(run_command, find_binary, import_nvml=import_nvml, read_file=read_file,
                                  warn=warn, nvidia_smi_path=nvidia_smi_path)
    return collector.collect(backend)
