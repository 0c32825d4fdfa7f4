# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.gpu import health_checks as hc
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.health_parse import (
    bridges_above,
    iommu_mode,
    parse_lspci_acs,
    parse_smi_q,
    parse_topo_p2p,
    parse_xid,
)
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.nvidia_smi import parse_query_gpu

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures')
RTX_SYSFS = {
    '00000000:16:00.0': 'pci0000:13/0000:13:01.0/0000:14:00.0/0000:15:00.0/0000:16:00.0',
    '00000000:AB:00.0': 'pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:01.0/0000:ab:00.0',
}


def read(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


def smi(system='rtxpro6000x8_pcie', name='smi_q.txt'):
    return parse_smi_q(read('gpu_health', system, name))


def gpus(system='rtxpro6000x8_pcie'):
    return parse_query_gpu(read('nvidia_smi', system, 'query_gpu.csv'))


def shape(res):
    assert set(res) == set(['status', 'value', 'summary', 'problems', 'hint'])
    assert res['status'] in ('ok', 'warn', 'fail', 'skipped')
    json.dumps(res)  # the module returns it as is
    if res['status'] in ('ok', 'skipped'):
        assert res['problems'] == [] and res['hint'] == ''
    else:
        assert res['problems'] and res['hint']
    return res


def test_result_and_version_tuple():
    assert hc.result('ok', 1, 's') == {'status': 'ok', 'value': 1, 'summary': 's', 'problems': [], 'hint': ''}
    assert hc.version_tuple('580.65.06') == (580, 65, 6)
    assert hc.version_tuple('13.0') == (13, 0)
    with pytest.raises(ValueError):
        hc.version_tuple('580.xx')


def test_xid_tables():
    assert hc.XID_FATAL <= set(hc.XID_MEANINGS)


# driver

def test_driver_ok():
    res = shape(hc.check_driver('580.95.05', '13.0', '13.0', '580.65.06'))
    assert res['status'] == 'ok'
    assert res['summary'] == 'driver 580.95.05, CUDA 13.0, toolkit 13.0'
    assert res['value'] == {'driver': '580.95.05', 'cuda': '13.0', 'toolkit': '13.0', 'min_driver': '580.65.06'}


def test_driver_missing():
    res = shape(hc.check_driver('', '', '13.0', ''))
    assert res['status'] == 'fail' and res['summary'] == 'no NVIDIA driver answered'


def test_driver_too_old_for_toolkit():
    res = shape(hc.check_driver('570.86.15', '12.8', '13.0.88', ''))
    assert res['problems'] == ['driver 570.86.15 supports CUDA 12.8, toolkit is 13.0: install a 580+ driver']


def test_driver_below_minimum():
    res = shape(hc.check_driver('575.51.03', '12.9', '', '580.65.06'))
    assert res['problems'] == ['driver 575.51.03 is older than the minimum 580.65.06: upgrade the NVIDIA driver']


def test_driver_parts_not_given_are_not_checked():
    assert hc.check_driver('535.54.03', '12.2', '', '')['status'] == 'ok'


# GPUs

def test_gpus_ok_real_h200():
    res = shape(hc.check_gpus(gpus('h200x2_nvlink'), smi('h200x2_nvlink'), 2, ['9.0']))
    assert res['status'] == 'ok'
    assert res['summary'] == '2 GPUs (2 expected): NVIDIA H200'
    assert [g['health'] for g in res['value']['gpus']] == ['ok', 'ok']


def test_gpus_ok_rtx():
    res = shape(hc.check_gpus(gpus(), smi(), 8, ['12.0']))
    assert res['status'] == 'ok' and res['value']['count'] == 8


def test_gpus_none_expected():
    res = shape(hc.check_gpus([], [], 0, []))
    assert res['status'] == 'ok' and res['summary'] == '0 GPUs (0 expected)'


def test_gpus_too_few():
    res = shape(hc.check_gpus(gpus('h200x2_nvlink'), smi('h200x2_nvlink'), 8, []))
    assert res['status'] == 'fail'
    assert res['problems'][0].startswith('2 GPUs found, 8 expected: ')


def test_gpus_wrong_compute_capability():
    res = shape(hc.check_gpus(gpus(), smi(), 8, ['9.0', '10.0']))
    assert res['status'] == 'fail' and len(res['problems']) == 8
    assert res['problems'][0] == ('GPU 0 (00000000:16:00.0) NVIDIA RTX PRO 6000 Blackwell Server Edition has compute '
                                  'capability 12.0, not one of 9.0, 10.0: run on a host with those GPUs or build for '
                                  'sm_120')


def test_gpus_problems_fixture():
    res = shape(hc.check_gpus(gpus(), smi(name='smi_q_problems.txt'), 8, ['12.0']))
    assert res['status'] == 'fail'
    assert all(p.startswith('GPU 5 (00000000:AB:00.0) ') for p in res['problems'])
    # remap, retirement, ECC, persistence, HW Slowdown, HW Thermal Slowdown; the narrow link is check_pcie's.
    assert len(res['problems']) == 6
    assert res['value']['gpus'][5]['health'] == 'fail'
    assert res['value']['gpus'][7]['health'] == 'ok'  # idle is no fault


def one_gpu(**changes):
    """The H200's first GPU with changes applied to its nvidia-smi -q data."""
    info = copy.deepcopy(smi('h200x2_nvlink')[:1])
    for key, value in changes.items():
        if isinstance(value, dict):
            info[0][key].update(value)
        else:
            info[0][key] = value
    return hc.check_gpus(gpus('h200x2_nvlink')[:1], info, 1, [])


@pytest.mark.parametrize('changes, status, words', [
    ({'remapped_rows': {'pending': True}}, 'fail', 'row remap pending'),
    ({'remapped_rows': {'failure': True}}, 'fail', 'row remapping failure'),
    ({'retired_pages': {'pending': True}}, 'fail', 'page retirement pending'),
    ({'ecc_volatile_uncorrectable': 1}, 'fail', '1 volatile uncorrectable ECC error since'),
    ({'persistence_mode': 'Disabled'}, 'warn', 'persistence mode Disabled'),
    ({'clock_events_active': ['HW Slowdown']}, 'fail', 'held down by HW Slowdown'),
    ({'clock_events_active': ['HW Power Brake Slowdown']}, 'fail', 'held down by HW Power Brake Slowdown'),
    ({'clock_events_active': ['SW Thermal Slowdown']}, 'warn', 'held down by SW Thermal Slowdown'),
])
def test_gpus_each_rule(changes, status, words):
    res = shape(one_gpu(**changes))
    assert res['status'] == status
    assert len(res['problems']) == 1 and words in res['problems'][0]
    assert res['problems'][0].startswith('GPU 0 (00000000:00:06.0) ')


def test_gpus_benign_clock_events():
    assert one_gpu(clock_events_active=['Idle', 'Applications Clocks Setting'])['status'] == 'ok'


def test_gpus_matched_by_bus_id_in_any_case():
    info = smi()
    for gpu in info:
        gpu['bus_id'] = gpu['bus_id'].lower()
    info[5]['persistence_mode'] = 'Disabled'
    res = hc.check_gpus(gpus(), info, 8, [])
    assert res['status'] == 'warn' and res['problems'][0].startswith('GPU 5 (00000000:AB:00.0)')


# Xid

def test_xid_none():
    res = shape(hc.check_xid(parse_xid(read('gpu_health', 'h200x2_nvlink', 'dmesg.txt'))))
    assert res['status'] == 'ok' and res['value'] == {'events': 0, 'by_code': []}


def test_xid_composed():
    res = shape(hc.check_xid(parse_xid(read('gpu_health', 'rtxpro6000x8_pcie', 'dmesg_xid.txt'))))
    assert res['status'] == 'fail'
    by_code = dict((g['code'], g) for g in res['value']['by_code'])
    assert sorted(by_code) == [13, 31, 48, 63, 79, 94, 119, 154]
    assert by_code[13]['count'] == 3 and by_code[13]['gpus'] == ['0000:38:00']
    assert by_code[79]['meaning'] == 'GPU has fallen off the bus'
    assert by_code[154]['meaning'] == 'unknown Xid: see NVIDIA Xid catalogue'
    assert by_code[119]['last'].endswith('(GSP_RM_CONTROL) (0x20800a4c 0x4).')
    assert res['problems'][0].startswith('Xid 13 (Graphics engine exception (application error)) x3 on 0000:38:00')


def xid(code):
    return {'bus_id': '0000:3b:00', 'code': code, 'pid': None, 'process': None, 'message': 'm',
            'line': 'NVRM: Xid (PCI:0000:3b:00): %d, m' % code}


@pytest.mark.parametrize('code', sorted(hc.XID_FATAL))
def test_xid_fatal_codes_fail(code):
    assert shape(hc.check_xid([xid(code)]))['status'] == 'fail'


@pytest.mark.parametrize('code', [13, 31, 43, 45, 63, 94, 999])
def test_xid_other_codes_warn(code):
    assert shape(hc.check_xid([xid(code)]))['status'] == 'warn'


# PCIe

def rtx_bridges(lspci_name):
    acs = parse_lspci_acs(read('gpu_health', 'rtxpro6000x8_pcie', lspci_name))
    return dict((bus, [{'bdf': bdf, 'acs_ctl': acs[bdf]['acs_ctl']} for bdf in bridges_above('/sys/devices/' + path)])
                for bus, path in RTX_SYSFS.items())


def test_pcie_ok_real_h200():
    res = shape(hc.check_pcie(smi('h200x2_nvlink'), {'00000000:00:06.0': [], '00000000:00:07.0': []},
                              iommu_mode(read('gpu_health', 'h200x2_nvlink', 'cmdline.txt'), 0)))
    assert res['status'] == 'ok'
    assert res['summary'] == '2 GPUs: x16 gen 5; 0 bridges with ACS redirect; IOMMU off'


def test_pcie_ok_acs_off_passthrough():
    res = shape(hc.check_pcie(smi(), rtx_bridges('lspci_acs_off.txt'), {'mode': 'passthrough', 'evidence': 'e'}))
    assert res['status'] == 'ok'
    assert sorted(res['value']['acs']) == ['0000:13:01.0', '0000:14:00.0', '0000:15:00.0', '0000:97:01.0',
                                           '0000:98:00.0', '0000:99:01.0']


def test_pcie_acs_on_warns():
    res = shape(hc.check_pcie(smi(), rtx_bridges('lspci_acs_on.txt'), None))
    assert res['status'] == 'warn'
    assert len(res['problems']) == 4  # the root and downstream ports; upstream ports have no ACS
    assert res['problems'][0] == ('bridge 0000:13:01.0 above GPU 00000000:16:00.0 has ACS SrcValid+ ReqRedir+ '
                                  'CmpltRedir+: ' + hc.ACS_HINT)
    assert res['hint'] == hc.ACS_HINT


def test_pcie_iommu_translated_warns():
    iommu = iommu_mode(read('gpu_health', 'rtxpro6000x8_pcie', 'cmdline_translated.txt'), 96)
    res = shape(hc.check_pcie(smi(), {}, iommu))
    assert res['status'] == 'warn'
    assert res['problems'] == ['IOMMU translates device DMA (intel_iommu=on without iommu=pt): boot with iommu=pt']
    assert res['hint'] == 'boot with iommu=pt'


def test_pcie_narrow_link_fails_and_idle_gen_is_ok():
    res = shape(hc.check_pcie(smi(name='smi_q_problems.txt'), {}, None))
    assert res['status'] == 'fail'
    assert res['problems'] == ['GPU 5 (00000000:AB:00.0) link x8 of x16: reseat the card or check the slot']
    assert res['value']['gpus']['00000000:BC:00.0']['note'] == 'gen 1 of 5 while idle (trains up under load)'


def test_pcie_low_gen_under_load_warns():
    info = smi()
    info[2]['pcie']['gen_current'] = 3
    res = shape(hc.check_pcie(info, {}, None))
    assert res['status'] == 'warn'
    assert res['problems'][0].startswith('GPU 2 (00000000:38:00.0) link gen 3 of gen 5 while busy')


def test_pcie_no_gpu():
    assert shape(hc.check_pcie([], {}, None))['status'] == 'skipped'


# peer-to-peer

def test_p2p_ok():
    res = shape(hc.check_p2p(parse_topo_p2p(read('gpu_health', 'h200x2_nvlink', 'topo_p2p_r.txt')), 2))
    assert res['status'] == 'ok' and res['summary'] == 'peer-to-peer read OK between all 1 GPU pairs'


def test_p2p_blocked():
    matrix = parse_topo_p2p(read('gpu_health', 'rtxpro6000x8_pcie', 'topo_p2p_r_blocked.txt'))
    res = shape(hc.check_p2p(matrix, 8))
    assert res['status'] == 'fail' and len(res['problems']) == 16
    assert res['problems'][0] == 'GPU 0 <-> GPU 4 peer-to-peer read CNS: ' + hc.P2P_HINT
    assert res['summary'] == '16 GPU pairs of 28 blocked'


def test_p2p_asymmetric_and_missing():
    res = hc.check_p2p({(0, 1): 'OK', (1, 0): 'NS'}, 3)
    assert res['status'] == 'fail'
    assert res['problems'][0] == 'GPU 0 <-> GPU 2 peer-to-peer read missing: ' + hc.P2P_HINT
    assert 'GPU 1 <-> GPU 0 peer-to-peer read NS, back OK: ' + hc.P2P_HINT in res['problems']


def test_p2p_one_gpu_skipped():
    assert shape(hc.check_p2p({}, 1))['status'] == 'skipped'


# GPU memory held by others

def proc(pid, index, memory, own=False, cmdline='python3 train.py', user='alice'):
    return {'gpu_index': index, 'gpu_uuid': 'GPU-x', 'pid': pid, 'name': 'python3', 'used_memory_mib': memory,
            'cmdline': cmdline, 'user': user, 'own': own}


def h200_used(*memory):
    facts = gpus('h200x2_nvlink')
    for gpu, used in zip(facts, memory):
        gpu['memory_used_mib'] = used
    return facts


def test_clean_ok():
    res = shape(hc.check_gpu_clean(h200_used(0, 0), [], [0, 1], 1024))
    assert res['status'] == 'ok'
    assert res['summary'] == 'GPUs 0, 1: no foreign compute process, at most 1024 MiB in use besides the server'


def test_clean_foreign_process():
    res = shape(hc.check_gpu_clean(h200_used(5000, 0), [proc(77, 0, 5000)], [0, 1], 1024,
                                   fix='stop it or free the GPU before starting SGLang'))
    assert res['problems'] == ['GPU 0 is in use by a foreign process: PID 77 (python3 train.py, user alice) holds '
                               '5000 MiB; stop it or free the GPU before starting SGLang']
    assert res['value']['foreign'] == [77]


def test_clean_own_process_by_flag_or_pid():
    facts = h200_used(5000, 5000)
    processes = [proc(10, 0, 5000, own=True), proc(11, 1, 5000)]
    assert hc.check_gpu_clean(facts, processes, [0, 1], 1024, own_pids=[11])['status'] == 'ok'
    assert hc.check_gpu_clean(facts, processes, [0, 1], 1024)['status'] == 'fail'


def test_clean_own_processes_are_listed_with_what_made_them_own_and_summed_in_the_summary():
    own_by = 'unit sglang-server.service'
    processes = [dict(proc(10, 0, 5000, own=True, cmdline='sglang::scheduler_TP0', user='sglang'), own_by=own_by),
                 dict(proc(11, 1, None, own=True, cmdline='sglang::scheduler_TP1', user='sglang'), own_by=own_by)]
    res = shape(hc.check_gpu_clean(h200_used(5000, 5000), processes, [0, 1], 1024))
    assert res['status'] == 'ok'
    assert res['value']['own'] == [
        {'pid': 10, 'gpu_index': 0, 'used_memory_mib': 5000, 'command': 'sglang::scheduler_TP0', 'by': own_by},
        {'pid': 11, 'gpu_index': 1, 'used_memory_mib': None, 'command': 'sglang::scheduler_TP1', 'by': own_by}]
    assert res['summary'] == ("GPUs 0, 1: no foreign compute process; 2 processes of the server's own (unit "
                              "sglang-server.service) hold 5000 MiB (the amount of 1 not reported), at most 1024 MiB "
                              "in use besides the server")
    # One process named by own_pids only: no source to name, and one process "holds".
    res = shape(hc.check_gpu_clean(h200_used(5000, 0), [proc(10, 0, 5000)], [0, 1], 1024, own_pids=[10]))
    assert res['summary'].startswith("GPUs 0, 1: no foreign compute process; 1 process of the server's own holds 5000 MiB")


def test_clean_summary_of_a_failure_names_the_foreign_and_the_own():
    processes = [dict(proc(10, 0, 5000, own=True), own_by='process group 10 of /var/log/sglang/sglang-server.pid'),
                 proc(77, 1, 2048)]
    res = shape(hc.check_gpu_clean(h200_used(5000, 2048), processes, [0, 1], 1024))
    assert res['summary'] == ("GPU 1 of 2 not clean: foreign PID 77; 1 process of the server's own (process group "
                              "10 of /var/log/sglang/sglang-server.pid) holds 5000 MiB")
    assert res['value']['foreign'] == [77] and [entry['pid'] for entry in res['value']['own']] == [10]


def test_clean_a_failed_lookup_of_the_servers_processes_is_named_in_each_foreign_problem():
    errors = ['unit sglang-server.service: systemctl is not installed']
    res = shape(hc.check_gpu_clean(h200_used(5000, 0), [proc(77, 0, 5000)], [0, 1], 1024, own_errors=errors))
    assert res['problems'] == ["GPU 0 is in use by a foreign process: PID 77 (python3 train.py, user alice) holds 5000 "
                               "MiB (not told from the server's own processes: unit sglang-server.service: systemctl "
                               "is not installed); stop it or free the GPU"]
    assert res['value']['own_errors'] == errors


def test_clean_process_on_unused_gpu_is_ignored():
    assert hc.check_gpu_clean(h200_used(0, 5000), [proc(77, 1, 5000)], [0], 1024)['status'] == 'ok'


def test_clean_orphan_memory():
    res = shape(hc.check_gpu_clean(h200_used(3000, 0), [proc(10, 0, 1000, own=True)], [0], 1024))
    assert res['problems'] == ['GPU 0 has 2000 MiB in use beyond the server\'s own 1000 MiB (threshold 1024 MiB) that '
                               'no listed process holds (an orphan or a process in another PID namespace); free the '
                               'GPU or raise the memory threshold']


def test_clean_container_process_without_cmdline():
    res = hc.check_gpu_clean(h200_used(0, 0), [proc(5, None, None, cmdline='', user='')], [0], 1024)
    assert res['problems'][0] == ('GPU GPU-x is in use by a foreign process: PID 5 (python3, command line not '
                                  'visible) holds GPU memory (amount not reported); stop it or free the GPU')


def test_clean_no_gpus_skipped():
    assert shape(hc.check_gpu_clean([], [], [], 1024))['status'] == 'skipped'
