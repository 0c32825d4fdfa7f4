# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_info's settings: the roles' own variables resolved as the roles resolve them, with a real Templar over the
roles' real files; and the action plugin end to end through ansible-playbook."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from trust import trusted  # tests/unit/trust.py

from ansible_collections.inferops.gpu.plugins.action import node_info as action

ROOT = action.ROOT


def role_file(role, kind):
    with open(os.path.join(ROOT, 'roles', role, kind, 'main.yml'), encoding='utf-8') as handle:
        return yaml.safe_load(handle)


def settings(**inventory):
    loader = DataLoader()
    defaults, role_vars = action.load_role_variables(lambda path: action.load_file(loader, path))
    task_vars = {'inventory_hostname': 'gpu-node-01', 'groups': {'all': ['gpu-node-01'], 'ungrouped': []}}
    task_vars.update(trusted(inventory))
    return action.Settings(Templar(loader=loader, variables={}), task_vars, defaults, role_vars)


def no_lock(path):
    raise AssertionError('no lock should be looked for: %s' % path)


def test_without_inventory_the_roles_defaults_are_the_settings():
    found = settings()
    args = action.module_args(found)
    # What verify.yml typed before node_info, now taken from the roles.
    assert args == {
        'cuda_home': '/usr/local/cuda-13.0', 'cuda_toolkit_root': '/usr/local', 'ml_env_path': '/opt/ml-env',
        'runtime_env_spec': '/etc/inferops/runtime-env.json', 'state_dir': '/var/lib/inferops/sglang',
        'server': {'config': '/etc/sglang/sglang-server.yaml', 'manager': 'systemd', 'unit': 'sglang-server.service',
                   'unit_file': '/etc/systemd/system/sglang-server.service', 'log_path': '/var/log/sglang/sglang-server.log',
                   'run_dir': '/var/log/sglang', 'host': '127.0.0.1', 'port': 30000, 'api_key': None,
                   'served_model_name': None, 'skip_warmup': False, 'ready_line': True, 'probe': True},
    }
    parts = action.report_parts(found, no_lock)
    builtins = role_file('runtime_env', 'vars')
    assert parts == {'lock_wanted': 'none', 'nccl_profile': 'auto', 'nccl_topology': '',
                     'nccl_profiles': builtins['__runtime_env_nccl_profiles'],
                     'nccl_topology_map': builtins['__runtime_env_topology_profiles'], 'gateway_host': ''}
    assert found.problems == []


def test_the_inventory_wins_and_its_templates_are_rendered():
    found = settings(cuda_toolkit_root='/opt/cuda/', cuda_toolkit_version='12.8', site='/srv/{{ inventory_hostname }}',
                     ml_env_path='{{ site }}/ml-env', sglang_server_unit_name='sglang-kimi', sglang_server_log_dir='/srv/log',
                     sglang_server_config_dir='/srv/etc', sglang_server_manager='process', sglang_server_port='31000',
                     sglang_server_api_key='sk-{{ inventory_hostname }}', sglang_server_served_model_name='kimi-k2.5',
                     sglang_server_state_dir='/srv/state')
    args = action.module_args(found)
    assert args['cuda_home'] == '/opt/cuda/cuda-12.8' and args['cuda_toolkit_root'] == '/opt/cuda/'
    assert args['ml_env_path'] == '/srv/gpu-node-01/ml-env' and args['state_dir'] == '/srv/state'
    assert args['server'] == {
        'config': '/srv/etc/sglang-kimi.yaml', 'manager': 'process', 'unit': 'sglang-kimi.service',
        'unit_file': '/etc/systemd/system/sglang-kimi.service', 'log_path': '/srv/log/sglang-kimi.log', 'run_dir': '/srv/log',
        'host': '127.0.0.1', 'port': 31000, 'api_key': 'sk-gpu-node-01', 'served_model_name': 'kimi-k2.5',
        'skip_warmup': False, 'ready_line': True, 'probe': True}


@pytest.mark.parametrize('inventory, expected', [
    ({'sglang_server_host': '0.0.0.0'}, {'host': '127.0.0.1'}),
    ({'sglang_server_host': '::'}, {'host': '::1'}),
    ({'sglang_server_host': '10.0.0.5'}, {'host': '10.0.0.5'}),
    # The role's own reading of its arguments (vars/main.yml): both forms of an option, the last one given.
    ({'sglang_server_args': ['--tp', '8', '--node-rank', '1'], 'sglang_server_extra_args': []}, {'probe': False}),
    ({'sglang_server_extra_args': ['--node-rank=1']}, {'probe': False}),
    ({'sglang_server_extra_args': ['--node-rank', '0']}, {'probe': True}),
    ({'sglang_server_extra_args': ['--skip-server-warmup']}, {'skip_warmup': True}),
    ({'sglang_server_extra_args': ['--log-level', 'warning']}, {'ready_line': False}),
    # The role's default arguments come from the SGLang release it runs (a filter of the collection).
    ({'ml_env_sglang_version': '0.5.23'}, {'probe': True, 'skip_warmup': False}),
])
def test_the_server_is_probed_as_the_role_probes_it(inventory, expected):
    server = action.module_args(settings(**inventory))['server']
    assert dict((key, server[key]) for key in expected) == expected


def test_the_nccl_profiles_and_the_gateway_come_from_the_roles():
    found = settings(runtime_env_nccl_profile='h100_pcie', runtime_env_topology='PCIe',
                     runtime_env_nccl_profiles={'h100_pcie': {'NCCL_P2P_LEVEL': 'PXB'}, 'nvlink': {'NCCL_ALGO': 'Tree'}},
                     runtime_env_nccl_profile_by_topology={'pcie': 'h100_pcie'},
                     groups={'all': ['gw', 'gpu-node-01'], 'sglang_gateway': ['gw', 'gw2']})
    parts = action.report_parts(found, no_lock)
    assert parts['nccl_profile'] == 'h100_pcie' and parts['nccl_topology'] == 'PCIe'
    assert parts['nccl_profiles']['h100_pcie'] == {'NCCL_P2P_LEVEL': 'PXB'}
    assert parts['nccl_profiles']['nvlink'] == {'NCCL_ALGO': 'Tree'} and 'pcie_blackwell' in parts['nccl_profiles']
    assert parts['nccl_topology_map'] == {'pcie': 'h100_pcie', 'nvlink': 'nvlink'}
    # The rolling role's default: the first host of the group sglang_gateway; the inventory's own wins.
    assert parts['gateway_host'] == 'gw'
    assert action.report_parts(settings(rolling_gateway_host='gw2'), no_lock)['gateway_host'] == 'gw2'


def test_the_lock_the_profile_names(tmp_path):
    lock = tmp_path / 'ci-lock.txt'
    lock.write_bytes(b'six==1.17.0 \\\n    --hash=sha256:' + b'a' * 64 + b'\n')
    profiles = {'ci-abs': {'packages': {}, 'lock': str(lock)}, 'ci-rel': {'packages': {}, 'lock': 'locks/ci-lock.txt'},
                'ci-none': {'packages': {}}, 'ci-gone': {'packages': {}, 'lock': 'locks/gone.txt'}}
    needles = []

    def needle(path):
        """The playbook's files/ (Ansible's _find_needle): raises when the file is not there."""
        needles.append(path)
        if path == 'locks/ci-lock.txt':
            return str(lock)
        raise IOError('not found: %s' % path)

    def wanted(profile, root=ROOT):
        return action.lock_wanted(settings(ml_env_profile=profile, ml_env_profiles=profiles),
                                  lambda path: action.find_lock(path, needle, root))
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    assert wanted('ci-abs') == digest and wanted('ci-rel') == digest
    assert wanted('ci-none') == 'none' and wanted('ci-gone') == 'unreadable'
    # A profile that is not there (validate.yml refuses it) and the built-in default have no lock.
    assert wanted('no-such-profile') == 'none' and wanted('sglang-0.5.9-cu130') == 'none'
    assert needles == ['locks/ci-lock.txt', 'locks/gone.txt']
    # The ml_env role's files/ comes first, as in the role's lookup.
    in_role = tmp_path / 'collection' / 'roles' / 'ml_env' / 'files' / 'locks'
    in_role.mkdir(parents=True)
    (in_role / 'gone.txt').write_bytes(b'in the role\n')
    assert wanted('ci-gone', str(tmp_path / 'collection')) == hashlib.sha256(b'in the role\n').hexdigest()
    assert needles == ['locks/ci-lock.txt', 'locks/gone.txt']


def test_a_setting_that_cannot_be_templated_leaves_only_its_part_unread():
    found = settings(ml_env_path='{{ no_such_variable }}/ml-env', sglang_server_port='{{ undefined_port }}')
    args = action.module_args(found)
    assert 'ml_env_path' not in args and 'server' not in args and args['cuda_home'] == '/usr/local/cuda-13.0'
    assert [problem.split(':')[0] for problem in found.problems] == ['ml_env_path', 'sglang_server_port']
    found = settings(sglang_server_port='http')
    assert 'server' not in action.module_args(found) and found.problems[0].startswith('sglang_server_port')


def test_without_the_roles_files_nothing_is_read_and_each_setting_is_named(tmp_path):
    loader = DataLoader()
    defaults, role_vars = action.load_role_variables(lambda path: action.load_file(loader, path), str(tmp_path))
    assert (defaults, role_vars) == ({}, {})
    found = action.Settings(Templar(loader=loader, variables={}), {}, defaults, role_vars)
    assert action.module_args(found) == {}
    assert found.problems[:2] == ['__cuda_toolkit_home is not defined', 'cuda_toolkit_root is not defined']


def test_the_task_options_win_over_the_resolved_ones():
    resolved = {'cuda_home': '/usr/local/cuda-13.0', 'server': {'config': '/etc/sglang/x.yaml', 'port': 30000}}
    assert action.merged_args(resolved, {'cuda_home': '/opt/cuda', 'gpu': False, 'server': {'port': 31000}}) == {
        'cuda_home': '/opt/cuda', 'gpu': False, 'server': {'config': '/etc/sglang/x.yaml', 'port': 31000}}
    assert action.merged_args({'ml_env_path': '/opt/ml-env'}, {'server': {'config': '/x'}})['server'] == {'config': '/x'}


def test_verify_yml_types_no_role_default_and_reads_no_role_file():
    with open(os.path.join(ROOT, 'playbooks', 'verify.yml'), encoding='utf-8') as handle:
        text = handle.read()
    plays = yaml.safe_load(text)
    body = yaml.safe_dump(plays)
    for literal in ('/var/log/sglang', '/etc/sglang', '30000', '/opt/ml-env', 'sglang-0.5.9-cu130', '/usr/local', "'13.0'",
                    '/var/lib/inferops', 'sglang-server', '127.0.0.1', 'vars/main.yml', 'defaults/main.yml', 'sglang_server_',
                    'cuda_toolkit_', 'ml_env_', 'runtime_env_'):
        assert literal not in body, literal
    assert [task.get('inferops.gpu.node_info', 'absent') for task in plays[0]['tasks']][0] is None


# -- through Ansible ---------------------------------------------------------------------------------
PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - inferops.gpu.node_info:
        gpu: false
      register: node
    - ansible.builtin.copy:
        content: "{{ node | to_json }}"
        dest: "{{ out }}"
      delegate_to: localhost
"""


def test_the_action_plugin_end_to_end(tmp_path):
    """ansible-playbook on localhost: the action plugin templates the roles' files with the host's variables (on
    this ansible-core), finds the lock as the role does (beside the playbook: files/), runs the module, adds its parts."""
    bindir = os.path.dirname(sys.executable)
    if not os.path.exists(os.path.join(bindir, 'ansible-playbook')):
        pytest.skip('ansible-playbook is not beside %s' % sys.executable)
    (tmp_path / 'files').mkdir()
    (tmp_path / 'files' / 'site.lock').write_text('six==1.17.0\n')
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    release = tmp_path / 'node' / 'releases' / 'abc'
    (release / '.ml_env').mkdir(parents=True)
    (release / '.verified').write_text('abc\n')
    (tmp_path / 'node' / 'ml-env').symlink_to(release)
    (tmp_path / 'node' / 'cuda-13.0').mkdir()
    inventory = {'all': {'hosts': {'localhost': {
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable, 'out': str(tmp_path / 'out.json'),
        'cuda_toolkit_root': str(tmp_path / 'node'), 'ml_env_path': '{{ cuda_toolkit_root }}/ml-env',
        'sglang_server_config_dir': str(tmp_path / 'node' / 'etc'), 'sglang_server_state_dir': str(tmp_path / 'node'),
        'ml_env_profile': 'site', 'ml_env_profiles': {'site': {'packages': {'six': '1.17.0'}, 'lock': 'site.lock'}},
        'sglang_server_api_key': 'sk-secret-key'}}}}
    (tmp_path / 'inventory.yml').write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, 'ansible.cfg'), ANSIBLE_HOME=str(tmp_path / 'ansible-home'),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'), ANSIBLE_STDOUT_CALLBACK='default',
               PATH=bindir + os.pathsep + os.environ.get('PATH', ''))
    proc = subprocess.run([os.path.join(bindir, 'ansible-playbook'), '-i', str(tmp_path / 'inventory.yml'), 'play.yml'],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    node = json.loads((tmp_path / 'out.json').read_text())
    assert node['release'] == str(release) and node['verified_marker'] == 'abc\n'
    assert node['toolkits_found'] == ['cuda-13.0'] and node['cuda_home'] == str(tmp_path / 'node' / 'cuda-13.0')
    assert node['server_installed'] is False and node['server'] == {} and node['gpu'] == {}
    assert node['lock_wanted'] == hashlib.sha256(b'six==1.17.0\n').hexdigest()
    assert node['nccl_profile'] == 'auto' and node['gateway_host'] == '' and 'pcie_blackwell' in node['nccl_profiles']
    # The server's key went to the module as a no_log option: never in the result, never printed.
    assert 'sk-secret-key' not in json.dumps(node) and 'sk-secret-key' not in proc.stdout
    assert node['changed'] is False
