# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module end to end: nvidia-smi and the kernel log replayed, the NCCL smoke test run for real
over the stand-in torch (tests/fixtures/nccl_standin), a hung nvidia-smi killed by timeout(1)."""

from __future__ import annotations

import os
import shutil
import sys
import time

import pytest
import yaml

from ansible.module_utils import basic

from module_harness import (
    TIMEOUT, assert_documented, assert_options_match_spec, invoke, patch_exits, record_argument_spec, unbounded,
)
from ansible_collections.inferops.gpu.plugins.module_utils.gpu import facts as gpu_facts
from ansible_collections.inferops.gpu.plugins.modules import gpu_health

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, '..', '..', 'fixtures')
STANDIN = os.path.abspath(os.path.join(HERE, '..', '..', '..', 'fixtures', 'nccl_standin'))
SMI = '/usr/bin/nvidia-smi'
H200_PROCESS = 562  # the process of the capture, holding memory on both GPUs
QUERIES = {'--query-gpu': 'query_gpu.csv', '--query-compute-apps': 'query_apps.csv', '--version': 'version.txt'}


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


def h200(argv):
    """The real 2x H200 captures, by command."""
    name = os.path.basename(argv[0])
    if name == 'dmesg':
        return 0, fixture('gpu_health', 'h200x2_nvlink', 'dmesg.txt'), ''
    args = argv[1:]
    if args == ['-q']:
        return 0, fixture('gpu_health', 'h200x2_nvlink', 'smi_q.txt'), ''
    if args[:2] == ['topo', '-p2p']:
        return 0, fixture('gpu_health', 'h200x2_nvlink', 'topo_p2p_r.txt'), ''
    if args[:2] == ['topo', '-m']:
        return 0, fixture('nvidia_smi', 'h200x2_nvlink', 'topo.txt'), ''
    for prefix, file_name in QUERIES.items():
        if args and args[0].startswith(prefix):
            text = fixture('nvidia_smi', 'h200x2_nvlink', file_name)
            return 0, text, ''
    raise AssertionError('unexpected command %r' % argv)


def no_pynvml():
    raise ImportError('no pynvml')


def processes_mentioning(text):
    found = []
    for name in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open('/proc/%s/cmdline' % name, 'rb') as handle:
                if text.encode() in handle.read():
                    found.append(int(name))
        except OSError:
            pass
    return found


@pytest.fixture
def host(monkeypatch, tmp_path):
    state = {'ran': [], 'bin': {'nvidia-smi': SMI, 'dmesg': '/usr/bin/dmesg', 'timeout': TIMEOUT}}

    def run_command(self, argv, **kwargs):
        assert kwargs.get('environ_update') == {'LC_ALL': 'C'}
        state['ran'].append(unbounded(argv))
        return h200(unbounded(argv))

    patch_exits(monkeypatch)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **k: state['bin'].get(name))
    monkeypatch.setattr(gpu_facts, 'import_pynvml', no_pynvml)
    # The ranks inherit the module's environment: the stand-in torch, its rendezvous under tmp_path.
    monkeypatch.setenv('PYTHONPATH', STANDIN)
    monkeypatch.setenv('NCCL_STANDIN_DIR', str(tmp_path / 'rdv'))
    monkeypatch.setenv('NCCL_STANDIN_GPUS', '2')
    return state


def test_documentation_matches_the_argument_spec_and_the_result(host, monkeypatch):
    seen = record_argument_spec(monkeypatch, gpu_health)
    result = invoke(gpu_health, {'_ansible_check_mode': True, 'expected_gpus': 2, 'own_pids': [H200_PROCESS]})
    assert_options_match_spec(gpu_health, seen)
    returns = yaml.safe_load(gpu_health.RETURN)
    for key in ('healthy', 'problems', 'advisories', 'count', 'driver_version', 'nccl_version'):
        assert_documented(result[key], returns[key], key)
    assert result['nccl_version'] == ''  # no smoke test, no NCCL loaded
    for name, check in result['checks'].items():
        assert set(check) == set(returns['checks']['contains']), name
    assert result['changed'] is False and result['healthy'] is True


def test_the_h200_host_is_fit_and_nothing_runs_beyond_reading(host):
    result = invoke(gpu_health, {'expected_gpus': 2, 'compute_capabilities': ['9.0'], 'toolkit_version': '13.0',
                                 'min_driver_version': '580.65.06', 'own_pids': [H200_PROCESS]})
    assert 'failed' not in result and result['healthy'] is True
    assert sorted(result['checks']) == ['driver', 'gpu_clean', 'gpus', 'p2p', 'pcie', 'xid']
    commands = [' '.join([os.path.basename(argv[0])] + argv[1:2]) for argv in host['ran']]
    assert all(command.split()[0] in ('nvidia-smi', 'dmesg') for command in commands), commands


def test_a_foreign_process_is_named_with_its_pid(host):
    result = invoke(gpu_health, {'checks': ['gpu_clean'], 'require': ['gpu_clean']})
    assert result['failed'] is True
    assert 'GPU 0 is in use by a foreign process: PID 562' in result['msg']
    assert result['checks']['gpu_clean']['summary'] == 'GPUs 0, 1 of 2 not clean: foreign PID 562'


UNIT = 'sglang-server.service'
SHOW = ['show', UNIT, '--property=LoadState,ActiveState,MainPID,ControlGroup']


@pytest.fixture
def serving(host, monkeypatch, tmp_path):
    """The H200 host serving: its captured process 562 runs in the unit's control group (cgroup v2)."""
    from ansible_collections.inferops.gpu.plugins.module_utils.gpu import health as gpu_health_utils
    host['bin']['systemctl'] = '/usr/bin/systemctl'
    group = tmp_path / 'cgroup' / 'system.slice' / UNIT
    group.mkdir(parents=True)
    (group / 'cgroup.procs').write_text('%d\n' % H200_PROCESS)
    monkeypatch.setattr(gpu_health_utils, 'CGROUP_ROOT', str(tmp_path / 'cgroup'))
    replay = basic.AnsibleModule.run_command

    def run_command(self, argv, **kwargs):
        command = unbounded(argv)  # every command under timeout(1)
        if os.path.basename(command[0]) == 'systemctl':
            host['ran'].append(command)
            assert command[1:] == SHOW, command
            return 0, ('MainPID=%d\nControlGroup=/system.slice/%s\nLoadState=loaded\nActiveState=active\n'
                       % (H200_PROCESS, UNIT)), ''
        return replay(self, argv, **kwargs)

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    return host


def test_the_servers_own_unit_is_not_foreign_and_is_named(serving):
    result = invoke(gpu_health, {'_ansible_check_mode': True, 'checks': ['gpu_clean'], 'require': ['gpu_clean'],
                                 'own_units': [UNIT]})
    assert 'failed' not in result, result.get('msg')
    clean = result['checks']['gpu_clean']
    assert result['healthy'] is True and result['changed'] is False and clean['status'] == 'ok'
    assert clean['value']['foreign'] == [] and clean['value']['own_errors'] == []
    assert [(entry['pid'], entry['gpu_index'], entry['by']) for entry in clean['value']['own']] == [
        (H200_PROCESS, 0, 'unit ' + UNIT), (H200_PROCESS, 1, 'unit ' + UNIT)]
    assert clean['summary'] == ("GPUs 0, 1: no foreign compute process; 1 process of the server's own (unit "
                                "sglang-server.service) holds 6156 MiB, at most 1024 MiB in use besides the server")
    assert ['/usr/bin/systemctl'] + SHOW in serving['ran']


def test_a_process_manager_pid_file_that_names_another_group_leaves_the_process_foreign(serving, tmp_path):
    pid_file = tmp_path / 'sglang-server.pid'
    pid_file.write_text('%d 1\n' % os.getpid())  # this test's PID, started at another time: not the server
    result = invoke(gpu_health, {'checks': ['gpu_clean'], 'own_pid_files': [str(pid_file)]})
    assert result['failed'] is True and 'GPU 0 is in use by a foreign process: PID 562' in result['msg']
    assert all(os.path.basename(argv[0]) == 'nvidia-smi' for argv in serving['ran'])


def test_the_nccl_smoke_test_runs_over_the_gpus_and_checks_the_sum(host):
    result = invoke(gpu_health, {'checks': ['nccl'], 'ml_env_python': sys.executable, 'nccl_size_mib': 1,
                                 'nccl_iters': 1})
    nccl = result['checks']['nccl']
    assert 'failed' not in result, result.get('msg')
    assert nccl['status'] == 'ok' and nccl['value']['world_size'] == 2
    assert nccl['value']['sum'] == nccl['value']['expected'] == 3
    assert nccl['value']['seconds'] > 0 and nccl['value']['busbw_gbps'] is not None
    # The NCCL the ranks loaded (the stand-in's torch.cuda.nccl.version(), torch 2.11's), as the RETURN sample has it.
    sample = yaml.safe_load(gpu_health.RETURN)['checks']['sample']['nccl']
    assert nccl['value']['nccl_version'] == result['nccl_version'] == sample['value']['nccl_version'] == '2.28.9'
    assert set(nccl['value']) == set(sample['value'])
    assert nccl['summary'].startswith('NCCL 2.28.9 all-reduce smoke test over 2 GPUs: sum 3 as expected')


def test_a_hang_is_cut_at_the_deadline_naming_the_cause_and_leaving_nothing(host, monkeypatch):
    monkeypatch.setenv('NCCL_STANDIN_FAULT', 'hang')
    started = time.monotonic()
    result = invoke(gpu_health, {'checks': ['nccl'], 'ml_env_python': sys.executable, 'nccl_timeout': 3})
    elapsed = time.monotonic() - started
    assert elapsed < 3 + 2, elapsed
    assert result['failed'] is True and result['healthy'] is False
    assert 'no progress in' in result['msg'] and 'NCCL_P2P_DISABLE=1' in result['msg']
    assert result['checks']['nccl']['value']['outcome'] == 'hang'
    # The NCCL of a hang is known: the ranks said it before the rendezvous.
    assert result['nccl_version'] == '2.28.9'
    assert result['checks']['nccl']['summary'].startswith('NCCL 2.28.9 all-reduce smoke test over 2 GPUs: hung')
    assert processes_mentioning('nccl-smoke-') == []


def test_a_wrong_sum_fails(host, monkeypatch):
    monkeypatch.setenv('NCCL_STANDIN_FAULT', 'wrong_sum')
    result = invoke(gpu_health, {'checks': ['nccl'], 'ml_env_python': sys.executable, 'nccl_size_mib': 1,
                                 'nccl_iters': 1})
    assert result['failed'] is True and result['checks']['nccl']['value']['outcome'] == 'wrong_sum'


@pytest.mark.parametrize('args, message', [
    ({'nccl_timeout': 0}, 'nccl_timeout must be at least 1, got 0'),
    ({'expected_gpus': -1}, 'expected_gpus must be 0 or more, got -1'),
    ({'compute_capabilities': ['sm_120']}, "compute_capabilities holds 'sm_120'; write each as major.minor"),
    ({'toolkit_version': 'cuda13'}, "toolkit_version must be a dotted version like 13.0 or 580.65.06, got 'cuda13'"),
    ({'checks': ['nccl']}, 'the nccl check needs ml_env_python'),
    ({'own_units': ['--all']}, "own_units holds '--all'; write each as a systemd unit name"),
    ({'own_pid_files': ['run/sglang-server.pid']}, "own_pid_files holds 'run/sglang-server.pid'; write each as an "
                                                   "absolute path"),
], ids=['timeout', 'expected', 'capability', 'toolkit', 'nccl_without_python', 'unit_an_option', 'pid_file_relative'])
def test_bad_options_fail_before_anything_runs(host, args, message):
    result = invoke(gpu_health, args)
    assert result['failed'] is True and message in result['msg']
    assert host['ran'] == []


@pytest.mark.skipif(not shutil.which('timeout'), reason='needs timeout(1)')
def test_a_hung_nvidia_smi_is_killed_and_named(monkeypatch, tmp_path):
    patch_exits(monkeypatch)
    smi = tmp_path / 'nvidia-smi'
    smi.write_text('#!/bin/sh\nexec sleep 300\n')
    smi.chmod(0o755)
    monkeypatch.setattr(gpu_facts, 'import_pynvml', no_pynvml)
    started = time.monotonic()
    result = invoke(gpu_health, {'nvidia_smi_path': str(smi), 'command_timeout': 1, 'checks': ['driver']})
    assert time.monotonic() - started < 1 + 4
    assert result['failed'] is True and 'fell off the bus' in result['msg'] and 'within 1 s' in result['msg']
