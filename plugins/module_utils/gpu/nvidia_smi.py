# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for nvidia-smi text output.

Pure functions over strings, so unit tests can replay captures recorded by
tests/gpu/capture_nvidia_smi.sh. Malformed input raises ValueError; callers
decide whether that is fatal.
"""

from __future__ import annotations

import re

GPU_QUERY_FIELDS = (
    'index', 'name', 'uuid', 'pci.bus_id', 'memory.total', 'memory.used', 'compute_cap', 'driver_version',
)
APPS_QUERY_FIELDS = ('gpu_uuid', 'pid', 'process_name', 'used_memory')

# Values from NVIDIA's "Legend:" under `nvidia-smi topo -m`, grouped by the
# slowest hop a GPU-to-GPU transfer has to cross.
LINK_TYPES = {
    'PIX': 'pcie_switch',
    'PXB': 'pcie_switch',
    'PHB': 'host_bridge',
    'NODE': 'host_bridge',
    'SYS': 'cpu_interconnect',
    'SOC': 'cpu_interconnect',  # older drivers' name for SYS
}

_ANSI_RE = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')
_NVLINK_RE = re.compile(r'^NV(\d*)$')
_GPU_LABEL_RE = re.compile(r'^GPU(\d+)$')
# First words of "CPU Affinity", "NUMA Affinity", "GPU NUMA ID": the header
# columns after the device matrix. Everything before them is a GPU or NIC.
_AFFINITY_FIRST_WORDS = ('CPU', 'NUMA', 'GPU')
_NOT_AVAILABLE = ('', 'N/A', '[N/A]', '[Not Supported]', '[Unknown Error]', '[Insufficient Permissions]')


def strip_ansi(text):
    return _ANSI_RE.sub('', text)


def _csv_rows(text, width, what):
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        # nvidia-smi does not quote CSV fields; no queried field contains ", ".
        cells = [c.strip() for c in line.split(',')]
        if len(cells) != width:
            raise ValueError('unexpected %s line (want %d fields): %r' % (what, width, line))
        rows.append(cells)
    return rows


def _int_or_none(value):
    if value in _NOT_AVAILABLE:
        return None
    return int(value)


def parse_query_gpu(text):
    """Parse `--query-gpu=<GPU_QUERY_FIELDS> --format=csv,noheader,nounits`."""
    gpus = []
    for cells in _csv_rows(text, len(GPU_QUERY_FIELDS), 'query-gpu'):
        try:
            index = int(cells[0])
        except ValueError:
            raise ValueError('unexpected query-gpu line: %r' % ', '.join(cells))
        gpus.append({
            'index': index,
            'name': cells[1],
            'uuid': cells[2],
            'pci_bus_id': cells[3],
            'memory_total_mib': _int_or_none(cells[4]),
            'memory_used_mib': _int_or_none(cells[5]),
            'compute_capability': None if cells[6] in _NOT_AVAILABLE else cells[6],
            'driver_version': cells[7],
        })
    return gpus


def parse_query_apps(text, uuid_to_index):
    """Parse `--query-compute-apps=<APPS_QUERY_FIELDS> --format=csv,noheader,nounits`.

    gpu_index is None for a uuid that is not a listed GPU (a MIG instance, say).
    """
    procs = []
    for cells in _csv_rows(text, len(APPS_QUERY_FIELDS), 'query-compute-apps'):
        procs.append({
            'gpu_index': uuid_to_index.get(cells[0]),
            'gpu_uuid': cells[0],
            'pid': int(cells[1]),
            'name': cells[2],
            'used_memory_mib': _int_or_none(cells[3]),
        })
    return procs


def _field(text, pattern):
    match = re.search(pattern, text, re.MULTILINE)
    return match.group(1) if match else ''


def parse_version(text):
    """Parse `nvidia-smi --version`; keys are '' when a line is absent (older drivers)."""
    return {
        'driver_version': _field(text, r'^DRIVER version\s*:\s*(\S+)'),
        'cuda_driver_version': _field(text, r'^CUDA (?:UMD )?Version\s*:\s*(\S+)'),
    }


def parse_banner(text):
    """Parse the header box of plain `nvidia-smi`."""
    # Newer drivers print "KMD Version" / "CUDA UMD Version" in the same box.
    return {
        'driver_version': _field(text, r'(?:Driver|KMD) Version:\s*(\S+)'),
        'cuda_driver_version': _field(text, r'CUDA (?:UMD )?Version:\s*([0-9][0-9.]*)'),
    }


def classify_link(code):
    """Map a `topo -m` cell to (type, nvlink count).

    The count is None for a bare "NV" (link count unknown), 0 for non-NVLink codes.
    """
    match = _NVLINK_RE.match(code)
    if match:
        return 'nvlink', int(match.group(1)) if match.group(1) else None
    return LINK_TYPES.get(code, 'unknown'), 0


def _split_cells(line):
    # Real output is tab separated; hand-pasted copies often are not.
    if '\t' in line:
        return [c.strip() for c in line.split('\t')]
    return line.split()


def parse_topology(text):
    """Parse `nvidia-smi topo -m`.

    Returns {'links': {(i, j): code} for i < j, 'numa': {i: int or None}}.
    Cells are taken by position: GPU rows carry an extra empty cell before
    "GPU NUMA ID" that the header does not have, so only the matrix and the
    two affinity cells right after it are trusted.
    """
    lines = strip_ansi(text).splitlines()
    header = None
    for pos, line in enumerate(lines):
        if 'GPU0' in _split_cells(line):
            header = pos
            break
    if header is None:
        raise ValueError('no GPU0 column in topo -m output')

    devices = []
    for name in _split_cells(lines[header]):
        if not name:
            continue
        # "CPU Affinity" and the rest end the device columns; matching on the
        # first word also works for headers that were split on whitespace.
        if name.split()[0] in _AFFINITY_FIRST_WORDS:
            break
        devices.append(name)
    gpu_columns = {}
    for pos, name in enumerate(devices):
        match = _GPU_LABEL_RE.match(name)
        if match:
            gpu_columns[pos] = int(match.group(1))

    links = {}
    numa = {}
    for line in lines[header + 1:]:
        if not line.strip() or line.startswith('Legend'):
            break
        cells = _split_cells(line)
        match = _GPU_LABEL_RE.match(cells[0])
        if not match:
            continue  # NIC rows
        row = int(match.group(1))
        values = cells[1:]
        if len(values) < len(devices):
            raise ValueError('short topo -m row: %r' % line)
        for pos, col in gpu_columns.items():
            if col > row:
                links[(row, col)] = values[pos]
        tail = values[len(devices):]
        numa_cell = tail[1] if len(tail) > 1 else ''
        numa[row] = int(numa_cell) if numa_cell.isdigit() else None
    return {'links': links, 'numa': numa}
