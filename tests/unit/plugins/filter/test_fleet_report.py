# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report's filters: what verify.yml read on a host -> a row -> the table."""

from __future__ import annotations

import json
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.gpu.plugins.filter.fleet_report import (
    COLUMNS,
    FilterModule,
    dist_info_versions,
    fleet_report_rows,
    fleet_report_table,
    row_cells,
    unit_model,
)

RELEASE = '/opt/ml-env.d/releases/0123456789ab'
PROFILES = {'pcie_blackwell': {'NCCL_PROTO': 'LL', 'NCCL_ALGO': 'Ring', 'NCCL_P2P_LEVEL': 'SYS',
                               'NCCL_MAX_NCHANNELS': '16', 'NCCL_BUFFSIZE': '16777216', 'NCCL_NTHREADS': '512'},
            'nvlink': {}, 'none': {}}
TOPOLOGY_MAP = {'pcie': 'pcie_blackwell', 'nvlink': 'nvlink'}
PINS = {'torch': '2.9.1+cu130', 'sgl-kernel': '0.3.21+cu130', 'flashinfer-python': '0.6.4',
        'flashinfer-cubin': '0.6.4', 'sglang': '0.5.9'}
UNIT = '\n'.join([
    '# Ansible managed',
    '[Service]',
    'Type=exec',
    'ExecStart=/opt/ml-env/bin/python -m sglang.launch_server --config /etc/sglang/sglang-server.yaml'
    ' --model-path /shared/kimi-k2.5-int4 --host 127.0.0.1 --port 30000 --served-model-name kimi-k2.5'
    ' --trust-remote-code --enable-metrics --tp 8 --cuda-graph-max-bs 128 --disable-custom-all-reduce',
    'StandardOutput=append:/var/log/sglang/sglang-server.log',
])


def gpu_result(count=8, name='NVIDIA RTX PRO 6000 Blackwell Server Edition', capability='12.0', summary='pcie'):
    return {'backend': 'nvml', 'count': count, 'reason': '' if count else 'nvidia-smi: not found',
            'driver_version': '580.95.05' if count else '', 'cuda_driver_version': '13.0' if count else '',
            'gpus': [{'index': i, 'name': name, 'compute_capability': capability, 'memory_total_mib': 97887}
                     for i in range(count)],
            'topology': {'summary': summary if count else 'none', 'pairs': []}, 'failed': False}


LOCK_SHA = 'ab' * 32


def blackwell_host(**override):
    """A host the main job provisioned: every part present."""
    raw = {
        'cuda_home': '/usr/local/cuda-13.0',
        'ptxas_stdout': 'ptxas: NVIDIA (R) Ptx optimizing assembler\nCopyright (c) 2005-2025 NVIDIA Corporation\n'
                        'Built on Wed_Aug_20_01:55:12_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.88\n',
        'toolkits_found': ['cuda-12.8', 'cuda-13.0'],
        'ml_env_path': '/opt/ml-env',
        'release': RELEASE,
        'verified_marker': '0123456789ab\n',
        'verify_json': json.dumps({'stage': 'verify', 'torch_cuda': '13.0', 'problems': [],
                                   'packages': [{'name': k, 'expected': v, 'installed': v, 'ok': True}
                                                for k, v in PINS.items()]}),
        'dist_infos': ['torch-2.9.1+cu130.dist-info', 'sgl_kernel-0.3.21+cu130.dist-info',
                       'flashinfer_python-0.6.4.dist-info', 'flashinfer_cubin-0.6.4.dist-info',
                       'sglang-0.5.9.dist-info', 'numpy-2.3.4.dist-info'],
        'pins_json': json.dumps({'packages': PINS, 'lock': LOCK_SHA}),
        'lock_wanted': LOCK_SHA,
        'runtime_env_json': json.dumps({'vars': dict(PROFILES['pcie_blackwell'], CUDA_HOME='/usr/local/cuda-13.0',
                                                     SGLANG_DISABLE_CUDNN_CHECK='1'),
                                        'path_prepend': ['/usr/local/cuda-13.0/bin']}),
        'nccl_profile': 'auto',
        'nccl_topology': '',
        'nccl_profiles': PROFILES,
        'nccl_topology_map': TOPOLOGY_MAP,
        'gpu': gpu_result(),
        'server_installed': True,
        'server': {'ready': True, 'served_model_name': 'kimi-k2.5',
                   'model_info': {'model_path': '/shared/kimi-k2.5-int4', 'is_generation': True}},
        'unit_text': UNIT,
        'environment_seen': {'differs': [], 'problems': [], 'error': ''},
        'throughput_last_json': json.dumps({'tokens_per_second': 95.4, 'measured_at': '2025-11-30T10:00:00Z',
                                            'baseline': 96.1, 'baseline_source': 'inventory', 'ratio': 0.9927,
                                            'passed': True, 'revision': 'abc', 'release': RELEASE}),
        'throughput_baseline_json': json.dumps({'tokens_per_second': 94.0, 'measured_at': '2025-11-29T10:00:00Z',
                                                'revision': 'abc', 'release': RELEASE, 'source': 'measured'}),
    }
    raw.update(override)
    return raw


def one(raw, host='gpu-node-01'):
    return fleet_report_rows([{'host': host, 'data': raw}])[0]


def test_a_provisioned_host_fills_every_column():
    row = one(blackwell_host())
    assert row['reported'] is True
    assert row['toolkit'] == {'version': '13.0.88', 'home': '/usr/local/cuda-13.0', 'source': 'ptxas',
                              'found': ['12.8', '13.0']}
    assert row['stack'] == {'packages': PINS, 'verified': True, 'torch_cuda': '13.0', 'drift': []}
    assert row['release'] == RELEASE
    assert row['env']['profile'] == 'pcie_blackwell'
    assert row['env']['expected'] == 'pcie_blackwell'
    assert row['env']['cuda_home'] == '/usr/local/cuda-13.0'
    assert row['gpus']['count'] == 8
    assert row['gpus']['compute_capabilities'] == ['12.0']
    assert row['topology'] == 'pcie'
    assert row['server'] == {'status': 'healthy', 'message': None, 'served_model_name': 'kimi-k2.5',
                             'model_path': '/shared/kimi-k2.5-int4'}
    assert row['model'] == {'served_model_name': 'kimi-k2.5', 'model_path': '/shared/kimi-k2.5-int4', 'source': 'server'}
    assert row['throughput']['tokens_per_second'] == 95.4
    assert row['throughput']['host_baseline'] == 94.0
    cells = row_cells(row)
    assert cells == {
        'host': 'gpu-node-01',
        'toolkit': '13.0.88',
        'stack': 'sglang 0.5.9, torch 2.9.1+cu130, sgl-kernel 0.3.21+cu130, flashinfer-python 0.6.4 (+1)',
        'release': '0123456789ab',
        'lock': 'abababababab',
        'env': 'pcie_blackwell',
        'sees': 'spec',
        'gpus': '8x RTX PRO 6000 Blackwell Server Edition cc 12.0',
        'topology': 'pcie',
        'group': '-',
        'server': 'healthy',
        'gateway': '-',
        'model': 'kimi-k2.5 (/shared/kimi-k2.5-int4)',
        'tok/s': '95.4 (0.99 of 96.1, passed)',
    }


def test_what_the_servers_python_sees_is_spec_or_each_difference_with_its_place():
    assert row_cells(one(blackwell_host(environment_seen=None)))['sees'] == '-'
    hand = ['CUDA_HOME=/usr/local/cuda-12.8 (/usr/lib/python3.12/sitecustomize.py line 12)', 'PATH (the manager\'s environment)']
    assert row_cells(one(blackwell_host(environment_seen={'differs': hand, 'error': ''})))['sees'] == '; '.join(hand)
    assert row_cells(one(blackwell_host(environment_seen={'differs': [], 'error': 'no such user'})))['sees'] == (
        'not read: no such user')


def test_the_row_is_json():
    rows = fleet_report_rows([{'host': 'a', 'data': blackwell_host()}, {'host': 'b', 'data': None}])
    assert json.loads(json.dumps(rows)) == rows


def test_a_bare_host_reports_dashes_and_never_raises():
    row = one({})
    assert row['reported'] is True
    assert [row[key] for key in ('toolkit', 'stack', 'release', 'lock', 'lock_wanted', 'env', 'gpus', 'group', 'server',
                                 'gateway', 'model', 'throughput')] == [None] * 12
    assert set(row_cells(row).values()) == {'gpu-node-01', '-'}


def test_an_unreachable_host_is_listed():
    rows = fleet_report_rows({'gpu-node-09': None})
    assert rows[0]['reported'] is False
    cells = row_cells(rows[0])
    assert cells['server'] == 'no report: unreachable or failed'
    assert cells['toolkit'] == cells['tok/s'] == '-'


@pytest.mark.parametrize('bad', ['', 'not json', '{"tokens_per_second": "fast"}', '[1, 2]', None, 42])
def test_files_that_are_not_what_they_should_be_give_dashes(bad):
    row = one(blackwell_host(verify_json=bad, dist_infos=None, runtime_env_json=bad, throughput_last_json=bad,
                             cuda_version_json=bad, ptxas_stdout=bad if isinstance(bad, str) else '',
                             toolkits_found=None, gpu=bad, server=bad, unit_text=None))
    for key in ('toolkit', 'stack', 'env', 'gpus', 'throughput', 'model', 'server'):
        assert row[key] is None, key


def test_toolkit_from_version_json_when_ptxas_is_missing():
    raw = blackwell_host(ptxas_stdout='', cuda_version_json=json.dumps({'cuda': {'name': 'CUDA SDK', 'version': '13.0.2'}}))
    assert one(raw)['toolkit'] == {'version': '13.0.2', 'home': '/usr/local/cuda-13.0', 'source': 'version.json',
                                   'found': ['12.8', '13.0']}


def test_toolkit_missing_but_others_found():
    row = one(blackwell_host(ptxas_stdout='', toolkits_found=['cuda-12.8', 'cuda-12.10', 'cuda', 'cuda-x']))
    assert row['toolkit'] == {'version': None, 'home': None, 'source': None, 'found': ['12.8', '12.10']}
    assert row_cells(row)['toolkit'] == '- (found 12.8, 12.10)'


def test_ptxas_without_the_build_number_gives_major_minor():
    assert one(blackwell_host(ptxas_stdout='Cuda compilation tools, release 12.8'))['toolkit']['version'] == '12.8'


def test_stack_drift_and_unverified_release_are_shown():
    raw = blackwell_host(dist_infos=['torch-2.10.0+cu130.dist-info', 'sglang-0.5.9.dist-info'],
                         verified_marker='')
    row = one(raw)
    assert row['stack']['packages']['torch'] == '2.10.0+cu130'
    assert row['stack']['drift'] == ['torch']
    assert row['stack']['verified'] is False
    assert row_cells(row)['stack'].endswith('UNVERIFIED DRIFT: torch')


def test_a_marker_of_another_release_is_not_verified():
    assert one(blackwell_host(verified_marker='ffffffffffff'))['stack']['verified'] is False


def test_stack_from_dist_info_alone_shows_the_key_packages():
    row = one(blackwell_host(verify_json=''))
    assert row['stack']['packages'] == {'sglang': '0.5.9', 'torch': '2.9.1+cu130', 'sgl-kernel': '0.3.21+cu130',
                                        'flashinfer-python': '0.6.4'}
    assert row['stack']['torch_cuda'] is None


def test_ci_stack_without_key_packages_shows_the_first_three():
    pins = {'packaging': '24.2', 'six': '1.17.0', 'idna': '3.10', 'markupsafe': '3.0.2'}
    report = json.dumps({'packages': [{'name': k, 'expected': v, 'installed': v, 'ok': True} for k, v in pins.items()]})
    row = one(blackwell_host(verify_json=report, dist_infos=[]))
    assert row_cells(row)['stack'] == 'idna 3.10, markupsafe 3.0.2, packaging 24.2 (+1)'


def test_dist_info_names():
    assert dist_info_versions(['/x/lib/python3.12/site-packages/Flashinfer_Python-0.6.4.dist-info', 'six-1.17.0.dist-info',
                               'not-a-dist', 'sgl_kernel-0.3.21+cu130.dist-info', 'pkg.egg-info']) == {
        'flashinfer-python': '0.6.4', 'six': '1.17.0', 'sgl-kernel': '0.3.21+cu130'}


def test_env_profile_nvlink_host_names_the_expected_of_two_empty_profiles():
    raw = blackwell_host(runtime_env_json=json.dumps({'vars': {'CUDA_HOME': '/usr/local/cuda-13.0'}, 'path_prepend': []}),
                         gpu=gpu_result(name='NVIDIA H200', capability='9.0', summary='nvlink'))
    row = one(raw)
    assert row['env']['profile'] == 'nvlink'
    assert row_cells(row)['env'] == 'nvlink'
    assert row_cells(row)['gpus'] == '8x H200 cc 9.0'


def test_env_profile_named_by_the_inventory():
    raw = blackwell_host(nccl_profile='none', runtime_env_json=json.dumps({'vars': {}}))
    assert one(raw)['env']['profile'] == 'none'


def test_env_profile_that_differs_from_what_the_inventory_wants():
    # The spec still holds the PCIe tuning, the inventory now asks for nvlink: the table says so.
    row = one(blackwell_host(nccl_profile='nvlink'))
    assert row['env']['profile'] == 'pcie_blackwell'
    assert row_cells(row)['env'] == 'pcie_blackwell (want nvlink)'


def test_env_profile_custom_and_topology_override():
    spec = json.dumps({'vars': {'NCCL_PROTO': 'Simple'}})
    assert one(blackwell_host(runtime_env_json=spec))['env']['profile'] == 'custom'
    # runtime_env_topology wins over what gpu_info saw, as in the role.
    raw = blackwell_host(nccl_topology='NVLink', runtime_env_json=json.dumps({'vars': {}}))
    assert one(raw)['env'] == {'profile': 'nvlink', 'expected': 'nvlink', 'nccl': {}, 'cuda_home': None}


def test_env_profile_field_of_the_spec_is_taken():
    raw = blackwell_host(runtime_env_json=json.dumps({'profile': 'h100_pcie', 'vars': {'NCCL_PROTO': 'LL'}}))
    assert one(raw)['env']['profile'] == 'h100_pcie'


def test_gpus_without_any():
    row = one(blackwell_host(gpu=gpu_result(count=0)))
    assert row['gpus']['count'] == 0
    assert row['gpus']['reason'] == 'nvidia-smi: not found'
    assert row_cells(row)['gpus'] == '0'
    assert row_cells(row)['topology'] == 'none'


def test_gpus_mixed_models():
    gpu = gpu_result(count=2)
    gpu['gpus'][1].update(name='NVIDIA H200', compute_capability='9.0')
    assert row_cells(one(blackwell_host(gpu=gpu)))['gpus'] == '1x H200, 1x RTX PRO 6000 Blackwell Server Edition cc 12.0/9.0'


def test_gpu_info_that_failed_gives_a_dash():
    assert one(blackwell_host(gpu={'failed': True, 'msg': 'nvidia-smi timed out'}))['gpus'] is None


def test_server_not_installed():
    row = one(blackwell_host(server_installed=False, server={}, unit_text=''))
    assert row['server'] == {'status': 'not installed', 'message': None}
    assert row['model'] is None
    assert row_cells(row)['server'] == 'not installed'


def test_server_unhealthy_names_the_first_line_and_the_model_comes_from_the_unit():
    server = {'failed': True, 'ready': False, 'cause': 'not_running', 'msg': 'the server is not running\nmore'}
    row = one(blackwell_host(server=server))
    assert row['server'] == {'status': 'unhealthy', 'message': 'the server is not running'}
    assert row_cells(row)['server'] == 'unhealthy: the server is not running'
    assert row['model'] == {'served_model_name': 'kimi-k2.5', 'model_path': '/shared/kimi-k2.5-int4', 'source': 'unit'}


def test_server_unhealthy_without_a_message():
    assert one(blackwell_host(server={'ready': False}))['server'] == {'status': 'unhealthy', 'message': 'no answer'}


def test_unit_model_reads_quoted_words():
    unit = 'ExecStart=/p/python -m sglang.launch_server --model-path "/models/my model" --port 1 --served-model-name "a%%b"'
    assert unit_model(unit) == {'model_path': '/models/my model', 'served_model_name': 'a%b'}
    assert unit_model('ExecStart=/p/python --model-path') == {}
    assert unit_model('ExecStart=/p/python "unterminated') == {}
    assert unit_model('[Unit]\n') == {}
    assert unit_model(None) == {}


def test_model_path_only_is_shown_once():
    row = one(blackwell_host(server={'ready': True, 'served_model_name': '/srv/models/standin',
                                     'model_info': {'model_path': '/srv/models/standin'}}))
    assert row_cells(row)['model'] == '/srv/models/standin'


def test_throughput_failed_and_without_baseline():
    last = {'tokens_per_second': 19.2, 'baseline': 96.1, 'baseline_source': 'inventory', 'ratio': 0.1998, 'passed': False}
    assert row_cells(one(blackwell_host(throughput_last_json=json.dumps(last))))['tok/s'] == '19.2 (0.20 of 96.1, FAILED)'
    first = {'tokens_per_second': 50, 'baseline': None, 'baseline_source': 'none', 'ratio': None, 'passed': True}
    row = one(blackwell_host(throughput_last_json=json.dumps(first), throughput_baseline_json=''))
    assert row_cells(row)['tok/s'] == '50.0'
    assert row['throughput']['host_baseline'] is None


def test_table_lines_are_aligned_with_a_header():
    rows = fleet_report_rows([{'host': 'gpu-node-01', 'data': blackwell_host()}, {'host': 'n2', 'data': None},
                              {'host': 'n3', 'data': {}}])
    lines = fleet_report_table(rows)
    assert len(lines) == 5
    assert lines[0].split() == COLUMNS
    assert set(lines[1].replace(' ', '')) == {'='}
    starts = [lines[0].index(column) for column in COLUMNS]
    for line in lines[2:]:
        for start in starts[1:]:
            assert line[start - 2:start] == '  '
    assert lines[3].startswith('n2 ')
    assert 'unreachable' in lines[3]


def test_table_clips_long_cells_and_picks_columns():
    server = {'ready': False, 'msg': 'x' * 200}
    lines = fleet_report_table(fleet_report_rows({'h': blackwell_host(server=server)}), columns=['host', 'server'], width=30)
    assert lines[0].split() == ['host', 'server']
    assert lines[2].endswith('unhealthy: xxxxxxxxxxxxxxxx...')
    assert len(lines[2].split('  ', 1)[1].strip()) == 30


def test_table_refuses_an_unknown_column():
    with pytest.raises(AnsibleFilterError, match='unknown column.*gpu; allowed: host'):
        fleet_report_table([], columns=['host', 'gpu'])


def test_table_of_no_hosts_is_the_header():
    assert len(fleet_report_table([])) == 2


def test_filters_are_registered():
    assert set(FilterModule().filters()) == {'fleet_report_rows', 'fleet_report_table'}


def test_the_lock_of_the_release_and_a_fleet_on_more_than_one_lock():
    assert one(blackwell_host())['lock'] == LOCK_SHA
    assert row_cells(one(blackwell_host()))['lock'] == LOCK_SHA[:12]
    # Built without a lock, no release, an unreadable pin set.
    assert one(blackwell_host(pins_json=json.dumps({'packages': PINS})))['lock'] == 'none'
    assert one(blackwell_host(release='', pins_json=''))['lock'] is None
    assert one(blackwell_host(pins_json='{not json'))['lock'] is None
    same = fleet_report_rows([{'host': 'a', 'data': blackwell_host()}, {'host': 'b', 'data': blackwell_host()}])
    assert not [line for line in fleet_report_table(same) if line.startswith('Not one lock')]
    other = fleet_report_rows([{'host': 'a', 'data': blackwell_host()}, {'host': 'b', 'data': blackwell_host()},
                               {'host': 'c', 'data': blackwell_host(pins_json=json.dumps({'lock': 'cd' * 32}))}])
    assert fleet_report_table(other)[-1] == 'Not one lock: a, b on %s; c on %s' % (LOCK_SHA[:12], 'cd' * 6)


def test_a_node_built_from_another_lock_than_its_profile_names_says_which():
    assert row_cells(one(blackwell_host(lock_wanted='cd' * 32)))['lock'] == '%s (want %s)' % (LOCK_SHA[:12], 'cd' * 6)
    # The profile has no lock; the node's release came from one.
    assert row_cells(one(blackwell_host(lock_wanted='none')))['lock'] == '%s (want none)' % LOCK_SHA[:12]
    # Built without a lock, and the profile has none: nothing to say.
    assert row_cells(one(blackwell_host(pins_json=json.dumps({'packages': PINS}), lock_wanted='none')))['lock'] == 'none'
    assert one(blackwell_host(lock_wanted='unreadable'))['lock_wanted'] == 'unreadable'


GATEWAY_FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', 'fixtures', 'gateway')


def gateway_view(name, url, status=200, error=None):
    """The gateway part verify.yml reads: its GET /workers as smg 1.13.0 answered (recorded)."""
    with open(os.path.join(GATEWAY_FIXTURES, name)) as handle:
        workers = json.load(handle)['workers']
    return {'gateway': {'host': 'gw-01', 'status': status, 'error': error, 'workers': workers if status == 200 else None,
                        'url': url}}


@pytest.mark.parametrize('fixture, url, cell', [
    ('workers_draining.json', 'http://127.0.0.1:31101', 'in rotation'),
    ('workers_draining.json', 'http://127.0.0.1:31105/', 'out of rotation: draining'),
    ('workers_one_unhealthy.json', 'http://127.0.0.1:31104', 'out of rotation: not_ready'),
    ('workers_after_remove.json', 'http://127.0.0.1:31199', 'not registered'),
])
def test_the_gateway_column_says_how_the_gateway_sees_the_node(fixture, url, cell):
    row = one(gateway_view(fixture, url))
    assert row_cells(row)['gateway'] == cell
    assert json.loads(json.dumps(row)) == row


def test_a_gateway_that_does_not_answer_is_named():
    row = one(gateway_view('workers_draining.json', 'http://n:30000', status=None, error='Connection refused'))
    assert row_cells(row)['gateway'] == 'unknown: gw-01: Connection refused'
    row = one(gateway_view('workers_draining.json', 'http://n:30000', status=401))
    assert row_cells(row)['gateway'] == 'unknown: gw-01: HTTP 401'


def test_a_tp_group_is_shown_together_by_rank_and_its_other_ranks_through_rank_0():
    gateway = {'host': 'gw-01', 'status': 200, 'error': None, 'workers': [], 'url': 'http://k-a:30000'}
    hosts = [{'host': 'solo', 'data': {}},
             {'host': 'k-a', 'data': {'tp_group': {'name': 'kimi', 'rank': 1, 'nnodes': 2, 'leader': 'k-b'}, 'gateway': gateway}},
             {'host': 'other', 'data': {}},
             {'host': 'k-b', 'data': {'tp_group': {'name': 'kimi', 'rank': 0, 'nnodes': 2, 'leader': 'k-b'}, 'gateway': gateway}}]
    rows = fleet_report_rows(hosts)
    assert [row['host'] for row in rows] == ['solo', 'k-b', 'k-a', 'other']
    assert [row_cells(row)['group'] for row in rows] == ['-', 'kimi rank 0/2', 'kimi rank 1/2', '-']
    assert row_cells(rows[2])['gateway'] == 'through rank 0: k-b'
    assert row_cells(rows[1])['gateway'] == 'not registered'
