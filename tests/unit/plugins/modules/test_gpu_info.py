# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import os

import pytest
import yaml

from ansible.module_utils import basic

from module_harness import (
    TIMEOUT, assert_documented, assert_options_match_spec, invoke, patch_exits, record_argument_spec, unbounded,
)
from ansible_collections.inferops.gpu.plugins.doc_fragments import attributes
from ansible_collections.inferops.gpu.plugins.module_utils.gpu import facts as gpu_facts
from ansible_collections.inferops.gpu.plugins.modules import gpu_info


SMI = '/usr/bin/nvidia-smi'
DRIVER_FAILED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                 "Make sure that the latest NVIDIA driver is installed and running.")


def _no_pynvml():
    raise ImportError("No module named 'pynvml'")


@pytest.fixture
def host(monkeypatch):
    """A target without pynvml whose nvidia-smi (if any) replays a fixture."""
    state = {'replay': None, 'bin': {'nvidia-smi': SMI, 'timeout': TIMEOUT}, 'run_kwargs': [], 'warnings': []}

    def run_command(self, argv, **kwargs):
        state['run_kwargs'].append(kwargs)
        if state['replay'] is None:
            raise AssertionError('nvidia-smi should not run: %r' % (argv,))
        return state['replay'](unbounded(argv))

    patch_exits(monkeypatch)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **k: state['bin'].get(name))
    monkeypatch.setattr(basic.AnsibleModule, 'warn', lambda self, msg: state['warnings'].append(msg))
    monkeypatch.setattr(gpu_facts, 'import_pynvml', _no_pynvml)
    return state


def run_module(args):
    return invoke(gpu_info, args)


def test_h200_in_check_mode(host, smi_replay):
    host['replay'] = smi_replay('h200x2_nvlink')
    result = run_module({'_ansible_check_mode': True})
    assert result['changed'] is False
    assert 'failed' not in result
    assert (result['backend'], result['count'], result['reason']) == ('nvidia-smi', 2, '')
    assert (result['driver_version'], result['cuda_driver_version']) == ('580.159.04', '13.0')
    assert [g['pci_bus_id'] for g in result['gpus']] == ['00000000:00:06.0', '00000000:00:07.0']
    assert result['topology'] == {
        'summary': 'nvlink', 'legend_source': 'nvidia-smi',
        'pairs': [{'gpus': [0, 1], 'link': 'NV18', 'type': 'nvlink', 'nvlinks': 18}]}
    assert [(p['gpu_index'], p['pid'], p['used_memory_mib']) for p in result['processes']] == [
        (0, 562, 4614), (1, 562, 1542)]
    assert 'ansible_facts' not in result
    assert all(kwargs.get('environ_update') == {'LC_ALL': 'C'} for kwargs in host['run_kwargs'])


@pytest.mark.parametrize('system, count, summary', [
    ('rtxpro6000x8_pcie', 8, 'pcie'),
    ('a100x4_mixed', 4, 'mixed'),
])
def test_other_hosts(host, smi_replay, system, count, summary):
    host['replay'] = smi_replay(system)
    result = run_module({})
    assert (result['changed'], result['count'], result['topology']['summary']) == (False, count, summary)
    assert len(result['topology']['pairs']) == count * (count - 1) // 2


def test_broken_driver_is_not_a_failure(host, smi_replay):
    host['replay'] = smi_replay('broken_driver')
    result = run_module({})
    assert 'failed' not in result
    assert (result['changed'], result['backend'], result['count']) == (False, 'none', 0)
    assert 'exited with code 9' in result['reason'] and DRIVER_FAILED in result['reason']
    assert result['gpus'] == [] and result['processes'] == []
    assert result['topology'] == {'summary': 'none', 'pairs': [], 'legend_source': 'none'}


def test_broken_driver_with_require_fails(host, smi_replay):
    host['replay'] = smi_replay('broken_driver')
    result = run_module({'require': True})
    assert result['failed'] is True
    assert result['msg'] == result['reason']
    assert DRIVER_FAILED in result['msg']
    assert result['count'] == 0


def test_require_is_satisfied_by_gpus(host, smi_replay):
    host['replay'] = smi_replay('a100x4_mixed')
    result = run_module({'require': True, '_ansible_check_mode': True})
    assert 'failed' not in result and result['count'] == 4


def test_nothing_installed(host):
    host['bin'] = {'timeout': TIMEOUT}
    result = run_module({})
    assert (result['backend'], result['count']) == ('none', 0)
    assert 'pynvml' in result['reason'] and 'nvidia-smi: not found' in result['reason']


def test_explicit_nvidia_smi_path(host, smi_replay, tmp_path):
    smi = tmp_path / 'nvidia-smi'
    smi.write_text('#!/bin/sh\n')
    smi.chmod(0o755)
    host['bin'] = {'timeout': TIMEOUT}
    host['replay'] = smi_replay('h200x2_nvlink', path=str(smi))
    result = run_module({'nvidia_smi_path': str(smi), 'backend': 'nvidia-smi'})
    assert result['count'] == 2


def test_explicit_nvidia_smi_path_missing(host, tmp_path):
    missing = str(tmp_path / 'nvidia-smi')
    result = run_module({'nvidia_smi_path': missing, 'backend': 'nvidia-smi'})
    assert result['reason'] == 'nvidia-smi: not found (looked for %s)' % missing


def test_topology_warning_reaches_module_warn(host, smi_replay):
    host['replay'] = smi_replay('a100x4_mixed', overrides={'topo.txt': (2, 'oops\n')})
    result = run_module({})
    assert result['topology']['summary'] == 'unknown'
    assert len(host['warnings']) == 1 and 'oops' in host['warnings'][0]


def test_invalid_backend_is_rejected(host):
    result = run_module({'backend': 'cuda'})
    assert result['failed'] is True
    assert 'backend' in result['msg']


# documentation against behaviour: a cheap stand-in for validate-modules


def test_documented_options_match_argument_spec(host, smi_replay, monkeypatch):
    seen = record_argument_spec(monkeypatch, gpu_info)
    host['replay'] = smi_replay('h200x2_nvlink')
    run_module({})
    assert_options_match_spec(gpu_info, seen)


@pytest.mark.parametrize('system', ['h200x2_nvlink', 'rtxpro6000x8_pcie', 'a100x4_mixed', 'broken_driver'])
def test_return_documentation_covers_result(host, smi_replay, system):
    host['replay'] = smi_replay(system)
    result = run_module({})
    returns = yaml.safe_load(gpu_info.RETURN)
    assert set(result) - {'changed'} == set(returns)
    for key, doc in returns.items():
        assert doc['returned'] and 'sample' in doc and doc['description'], key
        assert_documented(result[key], doc, key)


def test_documentation_metadata():
    doc = yaml.safe_load(gpu_info.DOCUMENTATION)
    assert doc['module'] == 'gpu_info'
    assert not doc['short_description'].endswith('.')
    assert doc['author'] == ['inferops.gpu maintainers (@inferops)']
    # Read-only: its attributes (full check mode, no diff) come from the collection's fragment.
    assert 'inferops.gpu.attributes.read_only' in doc['extends_documentation_fragment']
    fragment = yaml.safe_load(attributes.ModuleDocFragment.READ_ONLY)
    assert fragment['attributes']['check_mode']['support'] == 'full'
    yaml.safe_load(gpu_info.EXAMPLES)
    assert os.path.basename(gpu_info.__file__) == 'gpu_info.py'
