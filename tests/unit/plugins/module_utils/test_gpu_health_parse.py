# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import os
import struct

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.gpu.health_parse import (
    ACS_BITS,
    acs_from_config,
    bridges_above,
    iommu_mode,
    normalize_bdf,
    parse_lspci_acs,
    parse_smi_q,
    parse_topo_p2p,
    parse_xid,
)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'gpu_health')
RTX_BUSES = ['16', '1A', '38', '3C', '9A', 'AB', 'B8', 'BC']
CSV = os.path.join(FIXTURES, '..', 'nvidia_smi', 'rtxpro6000x8_pcie', 'query_gpu.csv')


def read(system, name):
    with open(os.path.join(FIXTURES, system, name)) as handle:
        return handle.read()


# nvidia-smi -q

def test_smi_q_real_h200():
    gpus = parse_smi_q(read('h200x2_nvlink', 'smi_q.txt'))
    assert [g['bus_id'] for g in gpus] == ['00000000:00:06.0', '00000000:00:07.0']
    first = gpus[0]
    assert first == {
        'bus_id': '00000000:00:06.0', 'name': 'NVIDIA H200', 'persistence_mode': 'Enabled',
        'pcie': {'gen_max': 5, 'gen_current': 5, 'gen_device_max': 5, 'gen_host_max': None,
                 'width_max': 16, 'width_current': 16},
        'replays': 0,
        'remapped_rows': {'correctable': 0, 'uncorrectable': 0, 'pending': False, 'failure': False},
        'retired_pages': {'sbe': None, 'dbe': None, 'pending': None},
        'ecc_mode': 'Enabled', 'ecc_volatile_uncorrectable': 0,
        'clock_events_active': ['Idle'],
        'memory_used_mib': 0, 'memory_total_mib': 143771,
    }
    assert gpus[1]['replays'] == 1


def test_smi_q_composed_rtx_matches_query_gpu():
    gpus = parse_smi_q(read('rtxpro6000x8_pcie', 'smi_q.txt'))
    with open(CSV) as handle:
        rows = [line.split(', ') for line in handle.read().splitlines()]
    assert [g['bus_id'] for g in gpus] == [row[3] for row in rows]
    assert [g['memory_used_mib'] for g in gpus] == [int(row[5]) for row in rows]
    assert set(g['name'] for g in gpus) == set([rows[0][1]])
    for gpu in gpus:
        assert gpu['pcie'] == {'gen_max': 5, 'gen_current': 5, 'gen_device_max': 5, 'gen_host_max': 5,
                               'width_max': 16, 'width_current': 16}
        assert gpu['clock_events_active'] == []
        assert gpu['ecc_volatile_uncorrectable'] == 0
        assert gpu['persistence_mode'] == 'Enabled'


def test_smi_q_problems():
    gpus = parse_smi_q(read('rtxpro6000x8_pcie', 'smi_q_problems.txt'))
    bad, idle = gpus[5], gpus[7]
    assert bad['bus_id'] == '00000000:AB:00.0'
    assert bad['persistence_mode'] == 'Disabled'
    assert bad['pcie']['width_current'] == 8
    assert bad['replays'] == 412
    assert bad['remapped_rows'] == {'correctable': 0, 'uncorrectable': 2, 'pending': True, 'failure': False}
    assert bad['retired_pages'] == {'sbe': 0, 'dbe': 1, 'pending': True}
    assert bad['ecc_volatile_uncorrectable'] == 2
    # The counters section next to it has "HW Thermal Slowdown : 18250000 us", not a state.
    assert bad['clock_events_active'] == ['HW Slowdown', 'HW Thermal Slowdown']
    assert idle['clock_events_active'] == ['Idle']
    assert idle['pcie']['gen_current'] == 1
    assert [g['bus_id'] for g in gpus[:5]] == ['00000000:%s:00.0' % b for b in RTX_BUSES[:5]]


OLD_DRIVER = """
==============NVSMI LOG==============

Driver Version                            : 470.182.03
Attached GPUs                             : 1
GPU 00000000:3B:00.0
    Product Name                          : Tesla V100-SXM2-32GB
    Persistence Mode                      : N/A
    PCI
        GPU Link Info
            PCIe Generation
                Max                       : 3
                Current                   : 3
            Link Width
                Max                       : 16x
                Current                   : 16x
        Replays Since Reset               : 0
    Clocks Throttle Reasons
        Idle                              : Not Active
        Applications Clocks Setting       : Not Active
        SW Power Cap                      : Active
        HW Slowdown                       : Not Active
            HW Thermal Slowdown           : Not Active
            HW Power Brake Slowdown       : Not Active
    FB Memory Usage
        Total                             : 32510 MiB
        Used                              : 0 MiB
    ECC Mode
        Current                           : Enabled
        Pending                           : Enabled
    ECC Errors
        Volatile
            Single Bit<PAD>
                Device Memory             : 4
                Register File             : 0
                Total                     : 4
            Double Bit<PAD>
                Device Memory             : 3
                Register File             : N/A
                Total                     : 3
        Aggregate
            Double Bit<PAD>
                Device Memory             : 9
                Total                     : 9
    Retired Pages
        Single Bit ECC                    : 1
        Double Bit ECC                    : 2
        Pending Page Blacklist            : No
    Remapped Rows                         : N/A
""".replace('<PAD>', ' ' * 12)  # older drivers end these section lines in spaces


def test_smi_q_older_driver_layout():
    gpu, = parse_smi_q(OLD_DRIVER)
    assert gpu['bus_id'] == '00000000:3B:00.0'
    assert gpu['persistence_mode'] is None
    # The Double Bit Total alone, not Total + its parts, and not the Aggregate block.
    assert gpu['ecc_volatile_uncorrectable'] == 3
    assert gpu['clock_events_active'] == ['SW Power Cap']
    assert gpu['pcie']['gen_device_max'] is None
    assert gpu['retired_pages'] == {'sbe': 1, 'dbe': 2, 'pending': False}
    assert gpu['remapped_rows'] == {'correctable': None, 'uncorrectable': None, 'pending': None, 'failure': None}


def test_smi_q_without_double_bit_total_sums_the_parts():
    text = OLD_DRIVER.replace('                Total                     : 3\n', '')
    assert parse_smi_q(text)[0]['ecc_volatile_uncorrectable'] == 3


def test_smi_q_ecc_not_supported_is_none():
    text = OLD_DRIVER.replace(': 3\n', ': N/A\n')
    assert parse_smi_q(text)[0]['ecc_volatile_uncorrectable'] is None


def test_smi_q_no_gpu_and_broken_driver():
    assert parse_smi_q('\n==============NVSMI LOG==============\n\nAttached GPUs : 0\n') == []
    with pytest.raises(ValueError):
        parse_smi_q("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


# topo -p2p

def test_topo_p2p_real_h200():
    assert parse_topo_p2p(read('h200x2_nvlink', 'topo_p2p_r.txt')) == {(0, 1): 'OK', (1, 0): 'OK'}


def test_topo_p2p_composed():
    ok = parse_topo_p2p(read('rtxpro6000x8_pcie', 'topo_p2p_r.txt'))
    assert len(ok) == 56 and set(ok.values()) == set(['OK'])
    blocked = parse_topo_p2p(read('rtxpro6000x8_pcie', 'topo_p2p_r_blocked.txt'))
    assert blocked[(0, 3)] == 'OK' and blocked[(3, 4)] == 'CNS' and blocked[(7, 0)] == 'CNS'
    assert sum(1 for code in blocked.values() if code == 'CNS') == 32


def test_topo_p2p_first_matrix_of_a_capture_of_all_modes():
    one = read('h200x2_nvlink', 'topo_p2p_r.txt')
    text = '== topo -p2p r\n' + one + '== topo -p2p w\n' + one.replace('OK\tX', 'NS\tX')
    assert parse_topo_p2p(text) == {(0, 1): 'OK', (1, 0): 'OK'}


def test_topo_p2p_malformed():
    with pytest.raises(ValueError):
        parse_topo_p2p('NVIDIA-SMI has failed')
    with pytest.raises(ValueError):
        parse_topo_p2p(' \tGPU0\tGPU1\t\n GPU0\tX\t\n')


# Xid

def test_xid_none_in_real_h200_dmesg():
    assert parse_xid(read('h200x2_nvlink', 'dmesg.txt')) == []


def test_xid_composed_dmesg():
    events = parse_xid(read('rtxpro6000x8_pcie', 'dmesg_xid.txt'))
    assert [(e['bus_id'], e['code']) for e in events] == [
        ('0000:38:00', 13), ('0000:38:00', 13), ('0000:38:00', 13), ('0000:3c:00', 31), ('0000:ab:00', 94),
        ('0000:ab:00', 63), ('0000:ab:00', 48), ('0000:bc:00', 79), ('0000:bc:00', 119), ('0000:bc:00', 154)]
    no_pid, with_pid, unknown, fell = events[0], events[2], events[5], events[7]
    assert (no_pid['pid'], no_pid['process']) == (None, None)
    assert no_pid['message'] == 'Graphics SM Warp Exception on (GPC 3, TPC 1, SM 0): Out Of Range Address'
    assert (with_pid['pid'], with_pid['process']) == (50917, 'python3')
    assert with_pid['message'].startswith('Graphics Exception: ChID 0010')
    assert (unknown['pid'], unknown['process']) == (None, None)
    assert unknown['message'].startswith('Row Remapper: New row')
    assert fell['message'] == 'GPU has fallen off the bus.'
    assert fell['line'].startswith('[14310.552199] NVRM: Xid')


def test_xid_journalctl_and_old_address_forms():
    text = ('Dec 03 10:42:17 gpu7 kernel: NVRM: Xid (PCI:0000:3B:00): 79, pid=1234, name=python3, GPU has fallen '
            'off the bus.\n'
            'Nov 22 18:29:55 hostname kernel: [  966.503025] NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask '
            '00000120, intr 10000000\n'
            'Dec 03 10:42:18 gpu7 kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n')
    events = parse_xid(text)
    assert [(e['bus_id'], e['code'], e['pid'], e['process']) for e in events] == [
        ('0000:3b:00', 79, 1234, 'python3'), ('0000:01:00', 31, None, None)]
    assert events[1]['message'] == 'Ch 0000000b, engmask 00000120, intr 10000000'


# lspci

def test_lspci_acs_on_and_off():
    on = parse_lspci_acs(read('rtxpro6000x8_pcie', 'lspci_acs_on.txt'))
    off = parse_lspci_acs(read('rtxpro6000x8_pcie', 'lspci_acs_off.txt'))
    assert sorted(on) == sorted(off)
    assert len(on) == 21
    gpus = [bdf for bdf, dev in on.items() if dev['description'].startswith('3D controller')]
    assert gpus == ['0000:%s:00.0' % b.lower() for b in RTX_BUSES]
    assert all(on[bdf]['acs_ctl'] is None and not on[bdf]['bridge'] for bdf in gpus)
    assert on['0000:00:00.0']['bridge'] is False  # a host bridge is no PCI-to-PCI bridge
    down = on['0000:15:00.0']
    assert down['bridge'] and down['description'].startswith('PCI bridge: Broadcom / LSI PEX890xx')
    assert down['acs_ctl'] == {'SrcValid': True, 'TransBlk': False, 'ReqRedir': True, 'CmpltRedir': True,
                               'UpstreamFwd': True, 'EgressCtrl': False, 'DirectTrans': False}
    assert off['0000:15:00.0']['acs_ctl'] == dict((bit, False) for bit in ACS_BITS)
    assert on['0000:14:00.0']['acs_ctl'] is None  # the upstream port has no ACS capability
    assert on['0000:97:01.0']['acs_ctl']['ReqRedir'] is True


def test_lspci_domain_form_and_bad_acsctl():
    text = '0001:c1:00.0 PCI bridge: Foo\n\tACSCtl:\tSrcValid- TransBlk- ReqRedir+ CmpltRedir- UpstreamFwd- ' \
           'EgressCtrl- DirectTrans-\n'
    assert parse_lspci_acs(text)['0001:c1:00.0']['acs_ctl']['ReqRedir'] is True
    with pytest.raises(ValueError):
        parse_lspci_acs('00:01.0 PCI bridge: Foo\n\tACSCtl:\tSrcValid+ TransBlk-\n')


def test_normalize_bdf():
    assert normalize_bdf('00000000:1A:00.0') == '0000:1a:00.0'
    assert normalize_bdf('1a:00.0') == '0000:1a:00.0'
    assert normalize_bdf('0000:1a:00.0') == '0000:1a:00.0'


# config space

def config_space(caps, size=4096):
    """caps: [(offset, cap id, body bytes)] chained in order."""
    data = bytearray(size)
    for n, (offset, cap_id, body) in enumerate(caps):
        following = caps[n + 1][0] if n + 1 < len(caps) else 0
        struct.pack_into('<I', data, offset, cap_id | (1 << 16) | (following << 20))
        data[offset + 4:offset + 4 + len(body)] = body
    return bytes(data)


def test_acs_from_config_walks_the_chain():
    # AER at 0x100, ACS at 0x1c0: capability register, then control 0x001d: SrcValid, ReqRedir, CmpltRedir, UpstreamFwd.
    data = config_space([(0x100, 0x0001, b''), (0x1c0, 0x000D, struct.pack('<HH', 0x007f, 0x001d))])
    assert acs_from_config(data) == {'SrcValid': True, 'TransBlk': False, 'ReqRedir': True, 'CmpltRedir': True,
                                     'UpstreamFwd': True, 'EgressCtrl': False, 'DirectTrans': False}
    off = config_space([(0x100, 0x000D, struct.pack('<HH', 0x007f, 0))])
    assert acs_from_config(off) == dict((bit, False) for bit in ACS_BITS)


def test_acs_from_config_without_acs():
    assert acs_from_config(config_space([(0x100, 0x0001, b''), (0x148, 0x0004, b'')])) is None
    assert acs_from_config(bytes(4096)) is None
    assert acs_from_config(b'\xff' * 4096) is None  # a device gone from the bus reads all ones


def test_acs_from_config_short_read_and_loop():
    with pytest.raises(ValueError):
        acs_from_config(bytes(256))  # what a non-root read gets
    loop = bytearray(4096)
    struct.pack_into('<I', loop, 0x100, 0x0001 | (0x100 << 20))
    with pytest.raises(ValueError):
        acs_from_config(bytes(loop))


# sysfs and IOMMU

def test_bridges_above():
    path = '/sys/devices/pci0000:13/0000:13:01.0/0000:14:00.0/0000:15:00.0/0000:16:00.0'
    assert bridges_above(path) == ['0000:13:01.0', '0000:14:00.0', '0000:15:00.0']
    assert bridges_above('/sys/devices/pci0000:00/0000:00:06.0/') == []  # the real H200 host: on the root bus
    with pytest.raises(ValueError):
        bridges_above('/sys/devices/platform/serial8250')


def test_bridges_above_joins_lspci():
    acs = parse_lspci_acs(read('rtxpro6000x8_pcie', 'lspci_acs_on.txt'))
    above = bridges_above('/sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:01.0/0000:ab:00.0')
    assert [acs[bdf]['acs_ctl'] is not None for bdf in above] == [True, False, True]


def test_iommu_mode():
    assert iommu_mode(read('h200x2_nvlink', 'cmdline.txt'), 0) == {
        'mode': 'off', 'evidence': 'no IOMMU groups in /sys/kernel/iommu_groups'}
    assert iommu_mode(read('rtxpro6000x8_pcie', 'cmdline.txt'), 96) == {
        'mode': 'passthrough', 'evidence': 'iommu=pt on the kernel command line'}
    assert iommu_mode(read('rtxpro6000x8_pcie', 'cmdline_translated.txt'), 96) == {
        'mode': 'translated', 'evidence': 'intel_iommu=on without iommu=pt'}
    assert iommu_mode('ro quiet', 40) == {
        'mode': 'translated', 'evidence': '40 IOMMU groups and no iommu=pt on the kernel command line'}
    assert iommu_mode('ro iommu.passthrough=1', 40)['mode'] == 'passthrough'
    assert iommu_mode('ro amd_iommu=on', None)['mode'] == 'translated'
    assert iommu_mode('ro quiet', None)['mode'] == 'off'
    # Arguments after "--" go to init, not to the kernel.
    assert iommu_mode('ro intel_iommu=on -- iommu=pt', 8)['mode'] == 'translated'
