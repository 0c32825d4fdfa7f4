# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for what gpu_health reads: `nvidia-smi -q`, `nvidia-smi topo -p2p r`, NVRM Xid lines of
the kernel log, `lspci -vvv`, raw PCI config space, sysfs device paths and /proc/cmdline.

Pure functions over strings and bytes, so unit tests replay captures (tests/gpu/capture_health.sh).
Malformed input raises ValueError where the caller must tell "broken" from "nothing there".
"""

from __future__ import annotations

import re
import struct

from ansible_collections.inferops.gpu.plugins.module_utils.gpu.nvidia_smi import strip_ansi

_NOT_AVAILABLE = ('', 'N/A', '[N/A]', '[Not Supported]', '[Unknown Error]', '[Insufficient Permissions]',
                  'Not Supported', 'Unknown Error')
_GPU_HEADER_RE = re.compile(r'^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$')
_LEADING_INT_RE = re.compile(r'^(-?\d+)')
# "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
# Drivers before ~450 print the address without "PCI:".
_XID_RE = re.compile(r'NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})\): (\d+),\s*(.*)$')
_XID_PID_RE = re.compile(r"^pid=('<unknown>'|<unknown>|\d+)(?:, name=([^,]*))?(?:,\s*(.*))?$")
_LSPCI_DEVICE_RE = re.compile(r'^(?:([0-9A-Fa-f]{4,8}):)?([0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]) (.*)$')
_ACS_FLAG_RE = re.compile(r'(\w+)([+-])')
_BDF_RE = re.compile(r'^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')

# Bit order of the ACS Control register (PCIe base spec 7.7.8.3), as lspci names the bits.
ACS_BITS = ('SrcValid', 'TransBlk', 'ReqRedir', 'CmpltRedir', 'UpstreamFwd', 'EgressCtrl', 'DirectTrans')
PCI_EXT_CAP_ID_ACS = 0x000D
_EXT_CAP_START = 0x100
# 4 KiB extended space of 4-byte aligned headers: more hops than this is a loop.
_EXT_CAP_MAX_HOPS = (4096 - _EXT_CAP_START) // 4


def _int_or_none(value):
    """'16x' -> 16, '143771 MiB' -> 143771, 'N/A' -> None."""
    if value in _NOT_AVAILABLE:
        return None
    match = _LEADING_INT_RE.match(value)
    return int(match.group(1)) if match else None


def _bool_or_none(value):
    if value in ('Yes', 'Active', 'Enabled', 'True'):
        return True
    if value in ('No', 'Not Active', 'Disabled', 'False'):
        return False
    return None


def _smi_blocks(text):
    """[(bus id, {path tuple: value})] per GPU. A line's level is its indent / 4; a line with a
    value can also head deeper lines ("HW Slowdown : Not Active" above "HW Thermal Slowdown")."""
    blocks = []
    fields = None
    stack = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        header = _GPU_HEADER_RE.match(line)
        if header:
            fields = {}
            blocks.append((header.group(1), fields))
            stack = []
            continue
        if fields is None or not line.startswith(' '):
            continue  # the banner before the first GPU, or a line nvidia-smi never indents
        level = (len(line) - len(line.lstrip(' '))) // 4 - 1
        # Keys never hold ':'; values may ("Bus Id : 00000000:00:06.0").
        key, sep, value = line.strip().partition(':')
        key = key.strip()
        del stack[level:]
        stack.extend([''] * (level - len(stack)))
        stack.append(key)
        if sep:
            fields[tuple(stack)] = value.strip()
    return blocks


def _section(fields, prefix):
    """{rest of path: value} of the fields under prefix."""
    n = len(prefix)
    return dict((path[n:], value) for path, value in fields.items() if path[:n] == prefix and len(path) > n)


def _volatile_uncorrectable(fields):
    """Sum of the volatile uncorrectable ECC counters, None when none is reported.

    Ampere and newer: "SRAM Uncorrectable Parity", "DRAM Uncorrectable", ... Older drivers: a
    "Double Bit" block (double bit = uncorrectable) of per-memory counters and their Total, so the
    Total alone is taken there, not added to its parts."""
    volatile = _section(fields, ('ECC Errors', 'Volatile'))
    double_bit = dict((path, value) for path, value in volatile.items() if path[0] == 'Double Bit')
    if double_bit:
        if ('Double Bit', 'Total') in double_bit:
            values = [double_bit[('Double Bit', 'Total')]]
        else:
            values = list(double_bit.values())
    else:
        values = [value for path, value in volatile.items() if 'Uncorrectable' in path[-1]]
    numbers = [n for n in (_int_or_none(v) for v in values) if n is not None]
    return sum(numbers) if numbers else None


def _clock_events_active(fields):
    # "Clocks Event Reasons" since driver 535, "Clocks Throttle Reasons" before; the
    # "... Counters" section next to it holds durations, not states.
    active = []
    for name in ('Clocks Event Reasons', 'Clocks Throttle Reasons'):
        for path, value in _section(fields, (name,)).items():
            if value == 'Active':
                active.append(path[-1])
    return active


def parse_smi_q(text):
    """Parse `nvidia-smi -q`: one dict per GPU in file order (see the keys below)."""
    blocks = _smi_blocks(text)
    if not blocks and not re.search(r'^Attached GPUs\s*:', text, re.MULTILINE):
        raise ValueError('no GPU section in nvidia-smi -q output: %r' % text.strip()[:200])
    gpus = []
    for bus_id, f in blocks:
        link = ('PCI', 'GPU Link Info')
        # Drivers print "Pending Page Blacklist"; the newer wording "Pending Page Retirement" is accepted too.
        pending = f.get(('Retired Pages', 'Pending Page Blacklist'),
                        f.get(('Retired Pages', 'Pending Page Retirement')))
        gpus.append({
            'bus_id': bus_id,
            'name': f.get(('Product Name',)),
            'persistence_mode': _text_or_none(f.get(('Persistence Mode',))),
            'pcie': {
                'gen_max': _int_or_none(f.get(link + ('PCIe Generation', 'Max'), '')),
                'gen_current': _int_or_none(f.get(link + ('PCIe Generation', 'Current'), '')),
                'gen_device_max': _int_or_none(f.get(link + ('PCIe Generation', 'Device Max'), '')),
                'gen_host_max': _int_or_none(f.get(link + ('PCIe Generation', 'Host Max'), '')),
                'width_max': _int_or_none(f.get(link + ('Link Width', 'Max'), '')),
                'width_current': _int_or_none(f.get(link + ('Link Width', 'Current'), '')),
            },
            'replays': _int_or_none(f.get(('PCI', 'Replays Since Reset'), '')),
            'remapped_rows': {
                'correctable': _int_or_none(f.get(('Remapped Rows', 'Correctable Error'), '')),
                'uncorrectable': _int_or_none(f.get(('Remapped Rows', 'Uncorrectable Error'), '')),
                'pending': _bool_or_none(f.get(('Remapped Rows', 'Pending'))),
                'failure': _bool_or_none(f.get(('Remapped Rows', 'Remapping Failure Occurred'))),
            },
            'retired_pages': {
                'sbe': _int_or_none(f.get(('Retired Pages', 'Single Bit ECC'), '')),
                'dbe': _int_or_none(f.get(('Retired Pages', 'Double Bit ECC'), '')),
                'pending': _bool_or_none(pending),
            },
            'ecc_mode': _text_or_none(f.get(('ECC Mode', 'Current'))),
            'ecc_volatile_uncorrectable': _volatile_uncorrectable(f),
            'clock_events_active': _clock_events_active(f),
            'memory_used_mib': _int_or_none(f.get(('FB Memory Usage', 'Used'), '')),
            'memory_total_mib': _int_or_none(f.get(('FB Memory Usage', 'Total'), '')),
        })
    return gpus


def _text_or_none(value):
    return None if value is None or value in _NOT_AVAILABLE else value


def parse_topo_p2p(text):
    """Parse `nvidia-smi topo -p2p r` (or w/n/a/p): {(i, j): code} for i != j.

    Codes are those of the legend: OK, NS, CNS, GNS, TNS, U (any other is kept as printed).
    Only the first matrix is read, so a file of several modes gives the first one."""
    lines = strip_ansi(text).splitlines()
    columns = None
    matrix = {}
    for line in lines:
        cells = line.split()
        if not cells:
            if columns is not None and matrix:
                break
            continue
        if cells[0].startswith('Legend'):
            break
        if columns is None:
            if cells[0] == 'GPU0':
                columns = [int(c[3:]) for c in cells if re.match(r'^GPU\d+$', c)]
            continue
        match = re.match(r'^GPU(\d+)$', cells[0])
        if not match:
            continue
        row = int(match.group(1))
        values = cells[1:]
        if len(values) != len(columns):
            raise ValueError('topo -p2p row has %d cells for %d GPUs: %r' % (len(values), len(columns), line))
        for col, code in zip(columns, values):
            if col != row:
                matrix[(row, col)] = code
    if columns is None:
        raise ValueError('no GPU0 column in topo -p2p output: %r' % text.strip()[:200])
    return matrix


def parse_xid(text):
    """NVRM Xid events of a kernel log (dmesg or `journalctl -k`), in log order."""
    events = []
    for line in text.splitlines():
        match = _XID_RE.search(line)
        if not match:
            continue
        rest = match.group(3).strip()
        pid = process = None
        owner = _XID_PID_RE.match(rest)
        if owner:
            pid = int(owner.group(1)) if owner.group(1).isdigit() else None
            name = owner.group(2)
            process = name.strip() if name and name.strip() not in ('<unknown>', "'<unknown>'") else None
            rest = (owner.group(3) or '').strip()
        events.append({
            'bus_id': match.group(1).lower(),
            'code': int(match.group(2)),
            'pid': pid,
            'process': process,
            'message': rest,
            'line': line.strip(),
        })
    return events


def normalize_bdf(bdf):
    """'16:00.0' or '00000000:16:00.0' (nvidia-smi) -> '0000:16:00.0', lower case: one key for all."""
    bdf = bdf.strip().lower()
    parts = bdf.split(':')
    if len(parts) == 2:
        return '0000:' + bdf
    return '%04x:%s:%s' % (int(parts[0], 16), parts[1], parts[2])


def _acs_flags(text):
    flags = dict((name, sign == '+') for name, sign in _ACS_FLAG_RE.findall(text))
    missing = [bit for bit in ACS_BITS if bit not in flags]
    if missing:
        raise ValueError('ACSCtl line lacks %s: %r' % (', '.join(missing), text))
    return dict((bit, flags[bit]) for bit in ACS_BITS)


def parse_lspci_acs(text):
    """Parse `lspci -vvv`: {bdf (normalize_bdf form): {'description', 'bridge', 'acs_ctl'}}.

    acs_ctl is None for a device without the Access Control Services capability (or whose
    capabilities lspci could not read: run it as root)."""
    devices = {}
    current = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            match = _LSPCI_DEVICE_RE.match(line)
            if match:
                bdf = normalize_bdf('%s:%s' % (match.group(1) or '0000', match.group(2)))
                description = match.group(3).strip()
                current = {'description': description, 'bridge': description.startswith('PCI bridge'),
                           'acs_ctl': None}
                devices[bdf] = current
            continue
        stripped = line.strip()
        if current is not None and stripped.startswith('ACSCtl:'):
            current['acs_ctl'] = _acs_flags(stripped[len('ACSCtl:'):])
    return devices


def acs_from_config(data):
    """The ACS control bits of a device from its raw config space (/sys/bus/pci/devices/BDF/config),
    None when it has no ACS capability. For hosts without pciutils.

    ValueError when data stops before the extended space: non-root reads get 64 or 256 bytes, and
    "no ACS" cannot be told from "not readable" then."""
    if len(data) < _EXT_CAP_START + 4:
        raise ValueError('config space of %d bytes has no extended capabilities: read it as root' % len(data))
    offset = _EXT_CAP_START
    for dummy in range(_EXT_CAP_MAX_HOPS):
        if offset < _EXT_CAP_START or offset + 4 > len(data):
            return None
        header = struct.unpack_from('<I', data, offset)[0]
        if header in (0, 0xFFFFFFFF):
            return None  # empty list, or a device gone from the bus
        if header & 0xFFFF == PCI_EXT_CAP_ID_ACS:
            if offset + 8 > len(data):
                raise ValueError('ACS capability at 0x%x cut off at %d bytes' % (offset, len(data)))
            control = struct.unpack_from('<H', data, offset + 6)[0]
            return dict((bit, bool(control & (1 << n))) for n, bit in enumerate(ACS_BITS))
        offset = (header >> 20) & 0xFFC
        if offset == 0:
            return None
    raise ValueError('PCIe extended capability list loops')


def bridges_above(sysfs_device_path):
    """BDFs of the bridges between the root complex and a device, nearest the root first, from
    its resolved sysfs path (/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0); the device
    itself (the last BDF of the path) excluded."""
    bdfs = [part for part in sysfs_device_path.strip().rstrip('/').split('/') if _BDF_RE.match(part.lower())]
    if not bdfs:
        raise ValueError('no PCI address in %r' % sysfs_device_path)
    return [bdf.lower() for bdf in bdfs[:-1]]


def _kernel_args(cmdline):
    args = []
    for token in cmdline.split():
        if token == '--':
            break  # the rest goes to init, not to the kernel
        args.append(token)
    return args


def iommu_mode(cmdline, group_count):
    """{'mode': 'off'|'passthrough'|'translated', 'evidence'}. group_count: entries of
    /sys/kernel/iommu_groups (None when unknown). DMA through a translating IOMMU is what makes
    peer-to-peer go through the root complex; passthrough (iommu=pt) leaves device DMA untranslated."""
    args = _kernel_args(cmdline)
    values = {}
    for arg in args:
        key, dummy, value = arg.partition('=')
        values[key] = value  # the last one wins, as in the kernel
    passthrough = values.get('iommu') == 'pt' or values.get('iommu.passthrough') in ('1', 'on', 'y', 'Y')
    enabled = [key for key in ('intel_iommu', 'amd_iommu') if values.get(key, '').split(',')[0] == 'on']
    if group_count == 0:
        return {'mode': 'off', 'evidence': 'no IOMMU groups in /sys/kernel/iommu_groups'}
    if passthrough:
        which = 'iommu=pt' if values.get('iommu') == 'pt' else 'iommu.passthrough=%s' % values['iommu.passthrough']
        return {'mode': 'passthrough', 'evidence': '%s on the kernel command line' % which}
    if enabled:
        return {'mode': 'translated', 'evidence': '%s=on without iommu=pt' % enabled[0]}
    if group_count:
        return {'mode': 'translated', 'evidence': '%d IOMMU groups and no iommu=pt on the kernel command line'
                % group_count}
    return {'mode': 'off', 'evidence': 'IOMMU group count unknown and no IOMMU option on the kernel command line'}
