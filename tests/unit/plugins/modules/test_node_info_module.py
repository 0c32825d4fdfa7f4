# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node_info module end to end on a directory laid out like a provisioned node (a real ptxas stand-in under
timeout(1), recorded nvidia-smi and systemctl answers, a stub SGLang server), and the agreement proof: the fleet
report's rows from what the module returns are the rows verify.yml's old per-host chain gave for the same node."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
import yaml
from ansible.module_utils import basic
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from trust import trusted  # tests/unit/trust.py

from node_stub import PTXAS_13, SHOW_STOPPED, START_LINE, VERSION_JSON
from module_harness import TIMEOUT, assert_options_match_spec, invoke, patch_exits, record_argument_spec, unbounded
from ansible_collections.inferops.gpu.plugins.action import node_info as action
from ansible_collections.inferops.gpu.plugins.filter.fleet_report import fleet_report_rows, fleet_report_table, row_cells
from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs
from ansible_collections.inferops.gpu.plugins.module_utils.gpu import facts as gpu_facts
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.versions import READY_LINE
from ansible_collections.inferops.gpu.plugins.modules import gpu_info, node_info, sglang_server

SMI = '/usr/bin/nvidia-smi'
PINS = {'torch': '2.9.1+cu130', 'sgl-kernel': '0.3.21+cu130', 'flashinfer-python': '0.6.4',
        'flashinfer-cubin': '0.6.4', 'sglang': '0.5.9'}
DIST_INFOS = ['torch-2.9.1+cu130.dist-info', 'sgl_kernel-0.3.21+cu130.dist-info', 'flashinfer_python-0.6.4.dist-info',
              'flashinfer_cubin-0.6.4.dist-info', 'sglang-0.5.9.dist-info', 'numpy-2.3.4.dist-info']
PCIE_BLACKWELL = {'NCCL_PROTO': 'LL', 'NCCL_ALGO': 'Ring', 'NCCL_P2P_LEVEL': 'SYS', 'NCCL_MAX_NCHANNELS': '16',
                  'NCCL_BUFFSIZE': '16777216', 'NCCL_NTHREADS': '512'}
UNIT = ('[Unit]\nDescription=SGLang server\n[Service]\nType=exec\n'
        'ExecStart=/opt/ml-env/bin/python -m sglang.launch_server --config /etc/sglang/sglang-server.yaml'
        ' --model-path /shared/kimi-k2.5-int4 --host 127.0.0.1 --port 30000 --served-model-name kimi-k2.5'
        ' --enable-metrics --tp 8 --cuda-graph-max-bs 128 --disable-custom-all-reduce\n')
LOCK = b'torch==2.9.1+cu130 \\\n    --hash=sha256:' + b'a' * 64 + b'\n'


@pytest.fixture
def target(monkeypatch, smi_replay):
    """The module's side of the node: nvidia-smi replays the 8x RTX PRO 6000 host (no pynvml), systemctl answers
    `state['systemctl']`; every other command (timeout(1) around the ptxas stand-in) really runs."""
    state = {'systemctl': SHOW_STOPPED, 'smi': smi_replay('rtxpro6000x8_pcie'), 'commands': []}
    real_run = basic.AnsibleModule.run_command

    def run_command(self, argv, **kwargs):
        inner = unbounded(argv)
        state['commands'].append(inner)
        if inner[0] == SMI:
            return state['smi'](inner)
        if inner[0] == 'systemctl':
            return 0, state['systemctl'], ''
        return real_run(self, argv, **kwargs)

    def get_bin_path(self, name, *args, **kwargs):
        return {'nvidia-smi': SMI, 'timeout': TIMEOUT}.get(name)

    def no_pynvml():
        raise ImportError("No module named 'pynvml'")
    patch_exits(monkeypatch)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', get_bin_path)
    monkeypatch.setattr(gpu_facts, 'import_pynvml', no_pynvml)
    return state


def write(path, content, mode=0o644):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    path.chmod(mode)


def provisioned(root, kind):
    """A node as the roles leave it, under root; returns the node's files by name.

    serving: the process manager's server answers (this process holds its pidfile), every part present.
    stopped: under systemd, stopped; the toolkit has no ptxas (version.json), the release drifted from its
    verification, the runtime env matches no profile, no throughput measured, the release from another lock.
    bare: nothing at all."""
    files = {}
    if kind == 'bare':
        return files
    release_name = '0123456789ab'
    release = root / 'opt' / 'ml-env.d' / 'releases' / release_name
    site = release / 'lib' / 'python3.12' / 'site-packages'
    installed = dict(PINS, torch='2.9.0+cu130') if kind == 'stopped' else PINS
    files['verify_json'] = json.dumps({'stage': 'verify', 'torch_cuda': '13.0', 'problems': [],
                                       'packages': [{'name': k, 'expected': v, 'installed': v, 'ok': True}
                                                    for k, v in PINS.items()]})
    files['pins_json'] = json.dumps({'packages': PINS, 'lock': hashlib.sha256(LOCK if kind == 'serving' else b'old').hexdigest()})
    for name in DIST_INFOS:
        if kind == 'stopped' and name.startswith('torch-'):
            name = 'torch-%s.dist-info' % installed['torch']
        (site / name).mkdir(parents=True)
    write(release / '.verified', release_name + '\n')
    write(release / '.ml_env' / 'verify.json', files['verify_json'])
    write(release / '.ml_env' / 'pins.json', files['pins_json'])
    (root / 'opt' / 'ml-env').symlink_to(release)
    write(root / 'locks' / 'ci.lock', LOCK)
    local = root / 'usr' / 'local'
    if kind == 'serving':
        write(local / 'cuda-13.0' / 'bin' / 'ptxas', "#!/bin/sh\ncat <<'EOF'\n%sEOF\n" % PTXAS_13, 0o755)
        (local / 'cuda-12.8').mkdir(parents=True)
        (local / 'cuda').symlink_to(local / 'cuda-13.0')
        spec = {'vars': dict(PCIE_BLACKWELL, CUDA_HOME='/usr/local/cuda-13.0', SGLANG_DISABLE_CUDNN_CHECK='1'),
                'path_prepend': ['/usr/local/cuda-13.0/bin']}
    else:
        write(local / 'cuda-12.8' / 'version.json', VERSION_JSON)
        spec = {'vars': {'NCCL_P2P_LEVEL': 'PXB', 'CUDA_HOME': '/usr/local/cuda-12.8'}, 'path_prepend': []}
    files['runtime_env_json'] = json.dumps(spec, indent=2, sort_keys=True) + '\n'
    write(root / 'etc' / 'inferops' / 'runtime-env.json', files['runtime_env_json'])
    write(root / 'etc' / 'sglang' / 'sglang-server.yaml', 'api-key: ""\n', 0o600)
    write(root / 'etc' / 'systemd' / 'system' / 'sglang-server.service', UNIT)
    log = root / 'var' / 'log' / 'sglang'
    write(log / 'sglang-server.log', START_LINE + '[2025-11-30 10:03:12] ' + READY_LINE + '\n')
    if kind == 'serving':
        write(log / 'sglang-server.pid', '%d %d\n' % (os.getpid(), procfs.read_proc(os.getpid()).starttime))
        state = root / 'var' / 'lib' / 'inferops' / 'sglang'
        files['throughput_last_json'] = json.dumps({
            'tokens_per_second': 95.4, 'measured_at': '2025-11-30T10:00:00Z', 'baseline': 96.1,
            'baseline_source': 'inventory', 'ratio': 0.9927, 'passed': True, 'revision': 'abc', 'release': str(release)},
            indent=2, sort_keys=True) + '\n'
        files['throughput_baseline_json'] = json.dumps({'tokens_per_second': 94.0, 'measured_at': '2025-11-29T10:00:00Z'})
        write(state / 'throughput-last.json', files['throughput_last_json'])
        write(state / 'throughput-baseline.json', files['throughput_baseline_json'])
    return files


def inventory(root, kind, port):
    """The host's variables: the paths moved under root; the rest the roles' defaults."""
    found = {'cuda_toolkit_root': str(root / 'usr' / 'local'), 'ml_env_path': str(root / 'opt' / 'ml-env'),
             'sglang_server_config_dir': str(root / 'etc' / 'sglang'), 'sglang_server_log_dir': str(root / 'var' / 'log' / 'sglang'),
             'sglang_server_state_dir': str(root / 'var' / 'lib' / 'inferops' / 'sglang'), 'sglang_server_port': port,
             'ml_env_profile': 'ci-locked',
             'ml_env_profiles': {'ci-locked': {'packages': PINS, 'lock': str(root / 'locks' / 'ci.lock')}}}
    if kind == 'serving':
        found.update(sglang_server_manager='process', sglang_server_served_model_name='kimi-k2.5')
    else:
        found.update(cuda_toolkit_version='12.8')
    return found


# -- the old chain (verify.yml before node_info), as the test's expectation --------------------------
def old_chain(root, kind, port, files):
    """What verify.yml's per-host chain published as verify_report_host for this node (its set_fact), from its
    reads: stat (lnk_source is the link's real path), command (stdout without its final newline), slurp, find,
    gpu_info and sglang_server state=healthy in check mode, each with failed_when: false."""
    # The chain read runtime_env's vars/main.yml for the built-in profiles (an inventory without its own).
    with open(os.path.join(action.ROOT, 'roles', 'runtime_env', 'vars', 'main.yml'), encoding='utf-8') as handle:
        runtime_vars = yaml.safe_load(handle)
    release = str((root / 'opt' / 'ml-env').resolve()) if kind != 'bare' else ''
    version = '13.0' if kind == 'serving' else '12.8'
    config = root / 'etc' / 'sglang' / 'sglang-server.yaml'
    manager = 'process' if kind == 'serving' else 'systemd'
    log_dir = str(root / 'var' / 'log' / 'sglang')
    gpu = invoke(gpu_info, {'command_timeout': 30})
    server = {}
    if config.exists():
        answer = invoke(sglang_server, dict(
            {'state': 'healthy', 'manager': manager, 'unit': 'sglang-server.service',
             'log_path': log_dir + '/sglang-server.log', 'run_dir': log_dir, 'host': '127.0.0.1', 'port': port,
             'skip_warmup': False, 'probe': True, 'command_timeout': 30, '_ansible_check_mode': True},
            **({'served_model_name': 'kimi-k2.5'} if kind == 'serving' else {})))
        answer['failed'] = False  # failed_when: false
        server = dict((k, v) for k, v in answer.items()
                      if k in ['ready', 'failed', 'msg', 'reason', 'cause', 'served_model_name', 'model_info'])
    return {
        'cuda_home': str(root / 'usr' / 'local' / ('cuda-' + version)),
        'ptxas_stdout': PTXAS_13.rstrip('\n') if kind == 'serving' else '',
        'cuda_version_json': VERSION_JSON if kind == 'stopped' else '',
        'toolkits_found': {'serving': ['cuda-12.8', 'cuda-13.0'], 'stopped': ['cuda-12.8'], 'bare': []}[kind],
        'ml_env_path': str(root / 'opt' / 'ml-env'),
        'release': release,
        'verified_marker': '0123456789ab\n' if release else '',
        'verify_json': files.get('verify_json', ''),
        'dist_infos': sorted(os.listdir(os.path.join(release, 'lib', 'python3.12', 'site-packages'))) if release else [],
        'pins_json': files.get('pins_json', ''),
        'lock_wanted': hashlib.sha256(LOCK).hexdigest() if kind != 'bare' else 'unreadable',
        'runtime_env_json': files.get('runtime_env_json', ''),
        'nccl_profile': 'auto',
        'nccl_topology': '',
        'nccl_profiles': runtime_vars['__runtime_env_nccl_profiles'],
        'nccl_topology_map': runtime_vars['__runtime_env_topology_profiles'],
        'gpu': dict((k, v) for k, v in gpu.items() if k not in ('invocation', 'changed', 'processes')),
        'server_installed': config.exists(),
        'server': server,
        'unit_text': UNIT if manager == 'systemd' and kind != 'bare' else '',
        'throughput_last_json': files.get('throughput_last_json', ''),
        'throughput_baseline_json': files.get('throughput_baseline_json', ''),
        'gateway': None,
    }


# -- the new way ------------------------------------------------------------------------------------
def new_module(root, kind, port, check_mode=False):
    """verify.yml now: the action plugin's settings from the roles' variables (a real Templar over the roles' files
    and these host variables), the module run with them, the report's parts added, published as verify.yml does."""
    loader = DataLoader()
    defaults, role_vars = action.load_role_variables(lambda path: action.load_file(loader, path))
    task_vars = {'inventory_hostname': 'gpu-node-01', 'groups': {'all': ['gpu-node-01']}}
    task_vars.update(trusted(inventory(root, kind, port)))
    settings = action.Settings(Templar(loader=loader, variables={}), task_vars, defaults, role_vars)
    args = action.module_args(settings)
    # The two paths the roles fix (runtime_env's spec, the systemd unit), moved under root like the rest.
    args['runtime_env_spec'] = str(root / 'etc' / 'inferops' / 'runtime-env.json')
    args['server']['unit_file'] = str(root / 'etc' / 'systemd' / 'system' / 'sglang-server.service')
    args['_ansible_check_mode'] = check_mode
    result = invoke(node_info, args)
    result.update(action.report_parts(settings, lambda path: action.find_lock(path, lambda p: p)))
    published = dict((k, v) for k, v in result.items()
                     if k not in ('changed', 'failed', 'invocation', 'warnings', 'deprecations', 'gateway_host'))
    published['gateway'] = None
    assert settings.problems == []
    return published


@pytest.mark.parametrize('kind', ['serving', 'stopped', 'bare'])
def test_the_report_rows_agree_with_the_old_chain(tmp_path, target, stub, kind):
    root = tmp_path / 'node'
    root.mkdir()
    files = provisioned(root, kind)
    old = old_chain(root, kind, stub, files)
    # What the server's Python sees has no counterpart in the old chain (issue 42; tests/unit/plugins/module_utils/
    # test_fleet_seen_env.py runs it).
    new = dict(new_module(root, kind, stub))
    new.pop('environment_seen')
    old_rows = fleet_report_rows([{'host': 'gpu-node-01', 'data': old}])
    new_rows = fleet_report_rows([{'host': 'gpu-node-01', 'data': new}])
    assert new_rows == old_rows
    assert fleet_report_table(new_rows) == fleet_report_table(old_rows)
    # Not an agreement on dashes: the node's parts are in the rows.
    if kind == 'serving':
        assert row_cells(new_rows[0]) == {
            'host': 'gpu-node-01', 'toolkit': '13.0.88',
            'stack': 'sglang 0.5.9, torch 2.9.1+cu130, sgl-kernel 0.3.21+cu130, flashinfer-python 0.6.4 (+1)',
            'release': '0123456789ab', 'lock': hashlib.sha256(LOCK).hexdigest()[:12], 'env': 'pcie_blackwell', 'sees': '-',
            'gpus': '8x RTX PRO 6000 Blackwell Server Edition cc 12.0', 'topology': 'pcie', 'group': '-', 'server': 'healthy',
            'gateway': '-', 'model': 'kimi-k2.5 (/shared/kimi-k2.5-int4)', 'tok/s': '95.4 (0.99 of 96.1, passed)'}
    elif kind == 'stopped':
        row = new_rows[0]
        assert row['toolkit']['version'] == '12.8.1' and row['toolkit']['source'] == 'version.json'
        assert row['stack']['drift'] == ['torch'] and row['env']['profile'] == 'custom'
        assert row['server'] == {'status': 'unhealthy', 'message': 'the server is not running'}
        assert row['model'] == {'served_model_name': 'kimi-k2.5', 'model_path': '/shared/kimi-k2.5-int4', 'source': 'unit'}
        assert row['lock'] != row['lock_wanted'] and row['throughput'] is None
    else:
        assert new_rows[0]['server'] == {'status': 'not installed', 'message': None}
    # The parts themselves are the same, but for ptxas's final newline (the command module strips it), the order of
    # what find lists (walk order, both) and the server's `failed`, which failed_when: false set to false.
    assert normalized(new) == normalized(old)


def normalized(raw):
    raw = dict(raw, ptxas_stdout=raw['ptxas_stdout'].rstrip('\n'), dist_infos=sorted(raw['dist_infos']),
               toolkits_found=sorted(raw['toolkits_found']))
    raw['server'] = dict((k, v) for k, v in raw['server'].items() if k != 'failed')
    return raw


def test_check_mode_reads_the_same_and_changes_nothing(tmp_path, target, stub):
    root = tmp_path / 'node'
    root.mkdir()
    provisioned(root, 'serving')
    before = sorted(str(path) for path in root.rglob('*'))
    assert new_module(root, 'serving', stub, check_mode=True) == new_module(root, 'serving', stub)
    assert sorted(str(path) for path in root.rglob('*')) == before
    # The ptxas stand-in ran under timeout(1), as every command a module runs.
    assert [str(root / 'usr' / 'local' / 'cuda-13.0' / 'bin' / 'ptxas'), '--version'] in target['commands']


def test_a_hung_nvidia_smi_leaves_the_gpus_out_and_the_rest_in(tmp_path, target, stub, monkeypatch):
    root = tmp_path / 'node'
    root.mkdir()
    provisioned(root, 'serving')
    real_run = basic.AnsibleModule.run_command

    def hanging(self, argv, **kwargs):
        if unbounded(argv)[0] == SMI:
            return 124, '', ''
        return real_run(self, argv, **kwargs)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', hanging)
    monkeypatch.setattr(node_info, 'module_runner', _instant_timeout)
    found = new_module(root, 'serving', stub)
    assert found['gpu']['failed'] is True and 'nvidia-smi' in found['gpu']['msg']
    row = fleet_report_rows([{'host': 'h', 'data': found}])[0]
    assert row['gpus'] is None and row['toolkit']['version'] == '13.0.88' and row['server']['status'] == 'healthy'


def _instant_timeout(module, seconds, environ_update=None, option='command_timeout'):
    """A BoundedRunner whose clock says every command used up its limit: a 124 is a timeout."""
    from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import BoundedRunner
    ticks = iter(range(0, 10 ** 6, seconds))

    def run_command(argv, **kwargs):
        if environ_update:
            kwargs.setdefault('environ_update', environ_update)
        return module.run_command(argv, **kwargs)
    return BoundedRunner(run_command, TIMEOUT, seconds, option=option, clock=lambda: next(ticks))


# -- the module's own contract ------------------------------------------------------------------------
def test_the_documentation_matches_the_argument_spec_and_the_result(tmp_path, target, stub, monkeypatch):
    root = tmp_path / 'node'
    root.mkdir()
    provisioned(root, 'serving')
    seen = record_argument_spec(monkeypatch, node_info)
    found = new_module(root, 'serving', stub)
    options = assert_options_match_spec(node_info, seen)
    suboptions = options['server']['suboptions']
    assert set(suboptions) == set(node_info.SERVER_OPTIONS)
    for name, doc in suboptions.items():
        spec = node_info.SERVER_OPTIONS[name]
        assert (doc['type'], doc.get('default'), doc.get('choices'), doc.get('required', False)) == (
            spec['type'], spec.get('default'), spec.get('choices'), spec.get('required', False)), name
    returns = yaml.safe_load(node_info.RETURN)
    types = {'str': str, 'list': list, 'dict': dict, 'bool': bool}
    assert set(found) - {'gateway'} == set(returns) - {'gateway_host'}
    for key, value in found.items():
        if key != 'gateway' and value is not None:
            assert isinstance(value, types[returns[key]['type']]), key


@pytest.mark.parametrize('args, message', [
    ({'command_timeout': 0}, 'command_timeout must be at least 1 (got 0)'),
    ({'server': {'config': '/c', 'log_path': '/l', 'run_dir': '/r', 'host': 'h', 'port': 30000}},
     'server.unit is required with server.manager=systemd'),
    ({'server': {'config': '/c', 'log_path': '/l', 'run_dir': '/r', 'host': 'h', 'port': 70000, 'manager': 'process'}},
     'server.port must be from 1 to 65535 (got 70000)'),
])
def test_bad_options_are_refused(target, args, message):
    found = invoke(node_info, args)
    assert found['failed'] is True and found['msg'] == message


def test_the_api_key_is_never_in_the_result(tmp_path, target, stub):
    found = invoke(node_info, {'gpu': False, 'server': {
        'config': str(tmp_path / 'none.yaml'), 'manager': 'process', 'log_path': str(tmp_path / 'x.log'),
        'run_dir': str(tmp_path), 'host': '127.0.0.1', 'port': stub, 'api_key': 'sk-very-secret'}})
    assert 'sk-very-secret' not in json.dumps(found) and found['server_installed'] is False
