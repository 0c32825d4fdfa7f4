# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_preflight in-process: nvidia-smi replayed from the recorded captures, the real /proc,
a real socket of this test process, real files."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import tempfile
import time

import pytest
import yaml

from ansible.module_utils import basic

from module_harness import (
    TIMEOUT, assert_documented, assert_options_match_spec, invoke, patch_exits, record_argument_spec, unbounded,
)
from ansible_collections.inferops.gpu.plugins.doc_fragments import attributes
from ansible_collections.inferops.gpu.plugins.module_utils.gpu import facts as gpu_facts
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.preflight import CHECKS
from ansible_collections.inferops.gpu.plugins.modules import sglang_preflight
from ports import free_port  # tests/unit/ports.py

SMI = '/usr/bin/nvidia-smi'
A100_GPU3 = 'GPU-f26547dc-a3ff-c4fa-07dc-3220a912a8ce'


def _no_pynvml():
    raise ImportError("No module named 'pynvml'")


@pytest.fixture
def host(monkeypatch):
    """A target without pynvml whose nvidia-smi (if any) replays a capture."""
    state = {'replay': None, 'bin': {'nvidia-smi': SMI, 'timeout': TIMEOUT}, 'run_kwargs': []}

    def run_command(self, argv, **kwargs):
        state['run_kwargs'].append(kwargs)
        if state['replay'] is None:
            raise AssertionError('nvidia-smi should not run: %r' % (argv,))
        return state['replay'](unbounded(argv))

    patch_exits(monkeypatch)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **k: state['bin'].get(name))
    monkeypatch.setattr(gpu_facts, 'import_pynvml', _no_pynvml)
    return state


@pytest.fixture
def listening():
    """A port this test process listens on, 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        sock.listen(1)
        yield sock.getsockname()[1]


def run_module(args):
    return invoke(sglang_preflight, args)


def test_clean_host_in_check_mode(host, smi_replay, tmp_path):
    host['replay'] = smi_replay('h200x2_nvlink')
    model = tmp_path / 'model'
    model.mkdir()
    result = run_module({'_ansible_check_mode': True, 'model_path': str(model), 'tp': 2, 'port': free_port(),
                         'log_dir': str(tmp_path), 'own_pids': [562]})
    assert 'failed' not in result, result['msg']
    assert result['changed'] is False and result['problems'] == []
    assert dict((name, check['status']) for name, check in result['checks'].items()) == {
        'model_path': 'ok', 'gpu_count': 'ok', 'gpu_clean': 'ok', 'port': 'ok', 'log_dir': 'ok', 'release': 'skipped'}
    assert [p['own'] for p in result['gpu_processes']] == [True, True]
    # Every command bounded, in the C locale.
    assert all(kwargs.get('environ_update') == {'LC_ALL': 'C'} for kwargs in host['run_kwargs'])
    assert host['run_kwargs']


def test_foreign_gpu_process_and_port_holder_fail_together(host, smi_replay, listening):
    # The "foreign" GPU process is this test process, so /proc has its real command line.
    host['replay'] = smi_replay('a100x4_mixed', overrides={
        'query_apps.csv': (0, '%s, %d, python, 18432\n' % (A100_GPU3, os.getpid()))})
    result = run_module({'tp': 4, 'port': listening})
    assert result['failed'] is True and result['changed'] is False
    gpu, port = result['problems']
    assert gpu.startswith('GPU 3 is in use by a foreign process: PID %d (' % os.getpid())
    assert gpu.endswith(') holds 18432 MiB; stop it or free the GPU before starting SGLang')
    assert port.startswith('port %d on 127.0.0.1 is held by PID %d (' % (listening, os.getpid()))
    assert port.endswith('); free it or set sglang_server_port')
    assert result['msg'] == 'SGLang preflight found 2 problems: (1) %s (2) %s' % (gpu, port)
    assert [(h['pid'], h['address'], h['own']) for h in result['port_holders']] == [(os.getpid(), '127.0.0.1', False)]
    # The same server, run again with its own pids, passes both.
    again = run_module({'tp': 4, 'port': listening, 'own_pids': [os.getpid()]})
    assert 'failed' not in again, again['msg']
    assert again['checks']['port']['reason'] == 'port %d on 127.0.0.1 is held by the server itself (PID %d)' % (
        listening, os.getpid())


def test_port_on_a_wildcard_host(host, listening):
    result = run_module({'host': '0.0.0.0', 'port': listening, 'ignore': ['gpu_count', 'gpu_clean']})
    assert result['failed'] and 'listening on 127.0.0.1' in result['msg']
    assert result['msg'].startswith('port %d on 0.0.0.0 is held by PID %d' % (listening, os.getpid()))


def test_container_without_gpus(host):
    host['bin'] = {'timeout': TIMEOUT}
    result = run_module({'port': free_port()})
    assert result['failed'] is True
    assert result['checks']['gpu_clean'] == {'status': 'skipped', 'reason': 'no nvidia-smi/NVML'}
    assert result['msg'].startswith('tp 1 x pp 1 = 1 GPU needed, 0 found (gpu_info: no nvidia-smi/NVML: NVML: ')
    assert 'nvidia-smi: not found' in result['msg']
    result = run_module({'port': free_port(), 'ignore': ['gpu_count']})
    assert 'failed' not in result
    assert result['checks']['gpu_count']['status'] == 'skipped'
    assert result['checks']['gpu_count']['reason'].startswith('ignored: tp 1 x pp 1 = 1 GPU needed, 0 found')


def test_gpu_checks_ignored_run_nothing(host):
    # host['replay'] is None: any nvidia-smi call fails the test.
    result = run_module({'port': free_port(), 'ignore': ['gpu_count', 'gpu_clean']})
    assert 'failed' not in result and result['gpu_processes'] == []
    result = run_module({'port': free_port(), 'gpu_count': 8, 'tp': 8, 'ignore': ['gpu_clean']})
    assert 'failed' not in result


def test_log_dir_of_a_missing_user(host, tmp_path):
    result = run_module({'log_dir': str(tmp_path), 'user': 'no-such-user-here', 'port': free_port(),
                         'ignore': ['gpu_count', 'gpu_clean']})
    assert result['failed'] and result['msg'] == ('user no-such-user-here does not exist; create it (the sglang_server '
                                                  'role does) or set sglang_server_user')


@pytest.fixture
def shared_dir():
    """A directory every user may reach (pytest's tmp_path is under a 0700 directory)."""
    path = tempfile.mkdtemp(prefix='preflight-')
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path)


def test_log_dir_of_a_real_unprivileged_user(host, shared_dir):
    try:
        nobody = pwd.getpwnam('nobody')
    except KeyError:
        pytest.skip('no user nobody')
    if os.geteuid() == nobody.pw_uid:
        pytest.skip('running as nobody')
    logs = os.path.join(shared_dir, 'logs')
    os.mkdir(logs)
    os.chmod(logs, 0o755)
    args = {'log_dir': logs, 'user': 'nobody', 'port': free_port(), 'ignore': ['gpu_count', 'gpu_clean']}
    result = run_module(args)
    assert result['failed'] and result['msg'].startswith('log_dir %s is not writable by user nobody' % logs)
    assert result['msg'].endswith('does not let it write; chown it to nobody or make it writable by one of its groups')
    os.chmod(logs, 0o777)
    assert 'failed' not in run_module(args)


def test_release(host, tmp_path):
    release = tmp_path / 'ml-env.d' / 'releases' / 'abc'
    release.mkdir(parents=True)
    link = tmp_path / 'ml-env'
    os.symlink(str(release), str(link))
    args = {'release': str(link), 'expected_release': str(release), 'port': free_port(),
            'ignore': ['gpu_count', 'gpu_clean']}
    result = run_module(args)
    assert result['msg'].startswith('release %s resolves to %s which has no .verified marker; ' % (link, release))
    (release / '.verified').write_text('abc\n')
    assert run_module(args)['checks']['release']['status'] == 'ok'


def test_hung_nvidia_smi_is_killed(monkeypatch, tmp_path):
    if not shutil.which('timeout'):
        pytest.skip('needs timeout(1)')
    patch_exits(monkeypatch)
    monkeypatch.setattr(gpu_facts, 'import_pynvml', _no_pynvml)
    smi = tmp_path / 'bin' / 'nvidia-smi'
    smi.parent.mkdir()
    smi.write_text('#!/bin/sh\nexec sleep 300\n')
    smi.chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (smi.parent, os.environ['PATH']))
    started = time.monotonic()
    result = run_module({'command_timeout': 1, 'port': free_port()})
    assert time.monotonic() - started < 5
    assert result['failed'] and result['checks']['gpu_clean']['status'] == 'failed'
    assert result['msg'].startswith('`%s --query-gpu=' % smi)
    assert 'within 1 s' in result['msg'] and 'command_timeout' in result['msg'] and 'Xid 79' in result['msg']


@pytest.mark.parametrize('args, msg', [
    ({'command_timeout': 0}, 'command_timeout must be at least 1 second (got 0)'),
    ({'tp': 0}, 'tp must be at least 1 (got 0)'),
    ({'pp': -1}, 'pp must be at least 1 (got -1)'),
    ({'gpu_count': -1}, 'gpu_count must not be negative (got -1)'),
    ({'gpu_memory_threshold_mib': -5}, 'gpu_memory_threshold_mib must not be negative (got -5)'),
])
def test_bad_arguments(host, args, msg):
    result = run_module(args)
    assert result['failed'] and result['msg'] == msg


def test_unknown_check_name_is_refused(host):
    result = run_module({'ignore': ['gpu_count', 'gpus']})
    assert result['failed'] and 'ignore' in result['msg'] and 'gpus' in result['msg']


# documentation against behaviour (as for gpu_info)


def test_documented_options_match_argument_spec(host, monkeypatch):
    seen = record_argument_spec(monkeypatch, sglang_preflight)
    run_module({'port': free_port(), 'ignore': ['gpu_count', 'gpu_clean']})
    options = assert_options_match_spec(sglang_preflight, seen)
    assert options['ignore']['choices'] == list(CHECKS)


def test_return_documentation_covers_result(host, smi_replay, listening):
    host['replay'] = smi_replay('rtxpro6000x8_pcie')
    result = run_module({'tp': 8, 'port': listening})
    assert result['failed'] and result['gpu_processes'] and result['port_holders']
    returns = yaml.safe_load(sglang_preflight.RETURN)
    assert set(result) - {'changed', 'failed', 'msg'} == set(returns)
    for key, doc in returns.items():
        assert doc['returned'] and 'sample' in doc and doc['description'], key
        assert_documented(result[key], doc, key)
    for sample in returns['problems']['sample']:
        assert sample == ' '.join(sample.split())


def test_documentation_metadata():
    doc = yaml.safe_load(sglang_preflight.DOCUMENTATION)
    assert doc['module'] == 'sglang_preflight'
    assert not doc['short_description'].endswith('.')
    assert doc['author'] == ['inferops.gpu maintainers (@inferops)']
    assert 'inferops.gpu.attributes.read_only' in doc['extends_documentation_fragment']
    fragment = yaml.safe_load(attributes.ModuleDocFragment.READ_ONLY)
    assert fragment['attributes']['check_mode']['support'] == 'full'
    for example in yaml.safe_load(sglang_preflight.EXAMPLES):
        assert set(example) <= {'name', 'inferops.gpu.sglang_preflight', 'register'}
        assert set(example['inferops.gpu.sglang_preflight']) <= set(doc['options'])
