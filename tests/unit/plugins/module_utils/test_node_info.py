# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_info's read of a node: real directory trees, recorded tool outputs, a stub SGLang server."""

from __future__ import annotations

import os

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs
from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout
from ansible_collections.inferops.gpu.plugins.module_utils._common.local_http import request as plain_http
from ansible_collections.inferops.gpu.plugins.module_utils.fleet import node_info as ni
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.versions import READY_LINE

from node_stub import PTXAS_13, SHOW_RUNNING, SHOW_STOPPED, START_LINE, VERSION_JSON, Stub


@pytest.fixture(autouse=True)
def stub_defaults():
    Stub.health, Stub.model, Stub.key = 200, 'kimi-k2.5', None


class Run:
    """A bounded run_command: answers from a table of argv[0]'s basename -> (rc, out, err) or an exception."""

    def __init__(self, answers=None):
        self.answers = answers or {}
        self.calls = []

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        answer = self.answers.get(os.path.basename(argv[0]))
        if answer is None:
            raise AssertionError('unexpected command %r' % (argv,))
        if isinstance(answer, Exception):
            raise answer
        return answer(argv) if callable(answer) else answer


def no_gpu():
    return {'backend': 'none', 'count': 0, 'reason': 'nvidia-smi: not found', 'driver_version': '',
            'cuda_driver_version': '', 'gpus': [], 'processes': [], 'topology': {'summary': 'none', 'pairs': []}}


def host(run=None, gpu=no_gpu):
    return ni.Host(run or Run(), plain_http, gpu)


def executable(path, text='#!/bin/sh\n'):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def server(tmp_path, port, **override):
    settings = {'config': str(tmp_path / 'etc' / 'sglang-server.yaml'), 'manager': 'process', 'unit': 'sglang-server.service',
                'unit_file': str(tmp_path / 'etc' / 'sglang-server.service'), 'log_path': str(tmp_path / 'log' / 'server.log'),
                'run_dir': str(tmp_path / 'log'), 'host': '127.0.0.1', 'port': port, 'api_key': None,
                'served_model_name': None, 'skip_warmup': False, 'ready_line': True, 'probe': True}
    settings.update(override)
    return settings


def installed(tmp_path, log=START_LINE + READY_LINE + '\n', pid=None):
    """The config, the log and, for the process manager, a pidfile naming `pid` (this process: alive)."""
    (tmp_path / 'etc').mkdir(exist_ok=True)
    (tmp_path / 'etc' / 'sglang-server.yaml').write_text('port: 30000\n')
    (tmp_path / 'log').mkdir(exist_ok=True)
    (tmp_path / 'log' / 'server.log').write_text(log)
    if pid:
        (tmp_path / 'log' / 'sglang-server.pid').write_text('%d %d\n' % (pid, procfs.read_proc(pid).starttime))


# -- toolkit ---------------------------------------------------------------------------------------
def test_ptxas_answers_and_version_json_is_then_not_read(tmp_path):
    home = tmp_path / 'cuda-13.0'
    executable(home / 'bin' / 'ptxas')
    (home / 'version.json').write_text(VERSION_JSON)
    run = Run({'ptxas': (0, PTXAS_13, '')})
    part = ni.toolkit(host(run), str(home), str(tmp_path))
    assert run.calls == [[str(home / 'bin' / 'ptxas'), '--version']]
    assert part == {'cuda_home': str(home), 'ptxas_stdout': PTXAS_13, 'cuda_version_json': '', 'toolkits_found': ['cuda-13.0']}


@pytest.mark.parametrize('answer', [(1, '', 'ptxas fatal: cannot run'), CommandTimeout(['ptxas'], 30, 'command_timeout')])
def test_version_json_when_ptxas_fails_or_hangs(tmp_path, answer):
    home = tmp_path / 'cuda-12.8'
    executable(home / 'bin' / 'ptxas')
    (home / 'version.json').write_text(VERSION_JSON)
    part = ni.toolkit(host(Run({'ptxas': answer})), str(home), None)
    assert part['ptxas_stdout'] == '' and part['cuda_version_json'] == VERSION_JSON and part['toolkits_found'] == []


def test_ptxas_that_is_not_an_executable_file_is_never_run(tmp_path):
    home = tmp_path / 'cuda-13.0'
    (home / 'bin').mkdir(parents=True)
    (home / 'bin' / 'ptxas').write_text('not executable')
    run = Run()
    part = ni.toolkit(host(run), str(home), None)
    assert run.calls == [] and part['ptxas_stdout'] == part['cuda_version_json'] == ''
    assert ni.toolkit(host(run), str(tmp_path / 'missing'), None)['cuda_home'] == str(tmp_path / 'missing')
    assert run.calls == []


def test_toolkits_beside_are_directories_named_cuda_dash_not_links_files_or_deeper(tmp_path):
    for name in ('cuda-12.8', 'cuda-13.0', 'cuda-13.0/cuda-9.9', 'other', '.cuda-1.0'):
        (tmp_path / name).mkdir()
    (tmp_path / 'cuda').symlink_to(tmp_path / 'cuda-13.0')
    (tmp_path / 'cuda-13').symlink_to(tmp_path / 'cuda-13.0')
    (tmp_path / 'cuda-notes.txt').write_text('')
    assert sorted(ni.toolkit(host(), None, str(tmp_path))['toolkits_found']) == ['cuda-12.8', 'cuda-13.0']
    assert ni.toolkit(host(), None, str(tmp_path / 'missing'))['toolkits_found'] == []


# -- ml-env ----------------------------------------------------------------------------------------
def release_tree(tmp_path, name='0123456789ab'):
    release = tmp_path / 'releases' / name
    site = release / 'lib' / 'python3.12' / 'site-packages'
    for dist in ('torch-2.9.1+cu130.dist-info', 'sglang-0.5.9.dist-info', '.hidden-1.0.dist-info',
                 'torch/deeper-1.0.dist-info', 'sglang'):
        (site / dist).mkdir(parents=True)
    (site / 'stray-1.0.dist-info').write_text('a file, not a directory')
    (release / '.ml_env').mkdir()
    (release / '.verified').write_text(name + '\n')
    (release / '.ml_env' / 'verify.json').write_text('{"packages": []}')
    (release / '.ml_env' / 'pins.json').write_text('{"lock": ""}')
    (tmp_path / 'current').symlink_to(release)
    return release


def test_the_release_behind_the_link_its_records_and_its_distributions(tmp_path):
    release = release_tree(tmp_path)
    part = ni.ml_env(host(), str(tmp_path / 'current'))
    assert part['release'] == str(release) and part['ml_env_path'] == str(tmp_path / 'current')
    assert part['verified_marker'] == '0123456789ab\n'
    assert part['verify_json'] == '{"packages": []}' and part['pins_json'] == '{"lock": ""}'
    # Three levels under lib/ (pythonX.Y/site-packages/<name>), directories only, no hidden ones: as the find module.
    assert sorted(part['dist_infos']) == ['sglang-0.5.9.dist-info', 'torch-2.9.1+cu130.dist-info']


def test_a_link_through_links_resolves_to_the_real_release(tmp_path):
    release = release_tree(tmp_path)
    (tmp_path / 'alias').symlink_to(tmp_path / 'current')
    assert ni.ml_env(host(), str(tmp_path / 'alias'))['release'] == str(release)


@pytest.mark.parametrize('layout', ['missing', 'directory', 'dangling'])
def test_no_link_no_release_and_nothing_read(tmp_path, layout):
    path = tmp_path / 'ml-env'
    if layout == 'directory':
        (path / '.ml_env').mkdir(parents=True)
        (path / '.verified').write_text('x')
    elif layout == 'dangling':
        path.symlink_to(tmp_path / 'gone')
    part = ni.ml_env(host(), str(path))
    if layout == 'dangling':
        # The stat module names a dangling link's target too; there is nothing to read there.
        assert part['release'] == str(tmp_path / 'gone')
        part['release'] = ''
    assert part == {'ml_env_path': str(path), 'release': '', 'verified_marker': '', 'verify_json': '', 'pins_json': '',
                    'dist_infos': []}


# -- GPUs ------------------------------------------------------------------------------------------
def test_gpu_facts_without_the_processes(smi_replay):
    from ansible_collections.inferops.gpu.plugins.module_utils.gpu.facts import collect_gpu_facts
    replay = smi_replay('h200x2_nvlink')

    def facts():
        return collect_gpu_facts(replay, lambda name: '/usr/bin/nvidia-smi', import_nvml=_no_nvml)
    part = ni.gpus(host(gpu=facts))
    assert part['count'] == 2 and part['topology']['summary'] == 'nvlink' and 'processes' not in part
    assert set(part) == {'backend', 'count', 'reason', 'driver_version', 'cuda_driver_version', 'gpus', 'topology'}


def _no_nvml():
    raise ImportError("No module named 'pynvml'")


def test_a_hung_nvidia_smi_is_a_failed_part_not_a_failed_read():
    def hung():
        raise CommandTimeout(['/usr/bin/nvidia-smi', '-q'], 30, 'command_timeout')
    part = ni.gpus(host(gpu=hung))
    assert part['failed'] is True and 'did not finish within 30 s' in part['msg'] and 'Xid 79' in part['msg']


# -- server ----------------------------------------------------------------------------------------
def test_a_serving_server_answers_ready_with_its_model(tmp_path, stub):
    installed(tmp_path, pid=os.getpid())
    part = ni.server_part(host(), server(tmp_path, stub, served_model_name='kimi-k2.5'))
    assert part == {'server_installed': True, 'unit_text': '',
                    'server': {'ready': True, 'served_model_name': 'kimi-k2.5',
                               'model_info': {'model_path': '/shared/kimi-k2.5-int4', 'is_generation': True}}}


def test_the_api_key_is_sent(tmp_path, stub):
    installed(tmp_path, pid=os.getpid())
    Stub.key = 'sk-node'
    assert ni.server_part(host(), server(tmp_path, stub))['server']['ready'] is False
    assert ni.server_part(host(), server(tmp_path, stub, api_key='sk-node'))['server']['ready'] is True


@pytest.mark.parametrize('case, expected', [
    ('health_503', 'the server runs but is not ready: /health_generate answered 503'),
    ('no_ready_line', "the server runs but is not ready: /health_generate is 200 but the log has no '%s' yet" % READY_LINE),
    ('other_model', "the server runs but is not ready: served model name is 'other', expected 'kimi-k2.5'"),
])
def test_a_running_server_that_does_not_serve_says_why(tmp_path, stub, case, expected):
    installed(tmp_path, log=START_LINE if case == 'no_ready_line' else START_LINE + READY_LINE + '\n', pid=os.getpid())
    Stub.health = 503 if case == 'health_503' else 200
    Stub.model = 'other' if case == 'other_model' else 'kimi-k2.5'
    found = ni.server_part(host(), server(tmp_path, stub, served_model_name='kimi-k2.5'))['server']
    assert found['ready'] is False and found['cause'] == 'not_ready' and found['msg'].startswith(expected)
    assert set(found) == {'ready', 'msg', 'cause'}


def test_warmup_skipped_or_a_quiet_log_level_does_not_wait_for_the_ready_line(tmp_path, stub):
    installed(tmp_path, log=START_LINE, pid=os.getpid())
    assert ni.server_part(host(), server(tmp_path, stub, skip_warmup=True))['server']['ready'] is True
    assert ni.server_part(host(), server(tmp_path, stub, ready_line=False))['server']['ready'] is True


def test_a_follower_is_asked_for_health_only(tmp_path, stub):
    installed(tmp_path, log='', pid=os.getpid())
    Stub.model = 'other'
    found = ni.server_part(host(), server(tmp_path, stub, probe=False, served_model_name='kimi-k2.5'))['server']
    # A follower has no /v1/models to name a model: ready, with nothing more to say.
    assert found['ready'] is True and found['served_model_name'] is None


def test_a_server_not_running_under_the_process_manager(tmp_path, stub):
    installed(tmp_path)
    found = ni.server_part(host(), server(tmp_path, stub))['server']
    assert found == {'ready': False, 'msg': 'the server is not running', 'cause': 'not_running'}


def test_systemd_the_unit_text_and_a_stopped_unit(tmp_path, stub):
    installed(tmp_path)
    (tmp_path / 'etc' / 'sglang-server.service').write_text('[Service]\nExecStart=/opt/ml-env/bin/python -m x\n')
    run = Run({'systemctl': (0, SHOW_STOPPED, '')})
    part = ni.server_part(host(run), server(tmp_path, stub, manager='systemd'))
    assert part['unit_text'].startswith('[Service]')
    assert part['server'] == {'ready': False, 'msg': 'the server is not running', 'cause': 'not_running'}
    assert all(call[:2] == ['systemctl', 'show'] for call in run.calls)


def test_systemd_a_running_unit_is_probed(tmp_path, stub):
    installed(tmp_path)
    run = Run({'systemctl': (0, SHOW_RUNNING.format(main=os.getpid()), '')})
    found = ni.server_part(host(run), server(tmp_path, stub, manager='systemd'))['server']
    assert found['ready'] is True and found['served_model_name'] == 'kimi-k2.5'


@pytest.mark.parametrize('answer, expected', [
    ((127, '', "timeout: failed to run command 'systemctl': No such file or directory"), 'systemctl show sglang-server.service failed'),
    ((0, 'LoadState=not-found\nActiveState=inactive\n', ''), 'the unit sglang-server.service does not exist'),
    (CommandTimeout(['systemctl', 'show'], 30, 'command_timeout'), '`systemctl show` did not finish within 30 s'),
])
def test_systemd_that_cannot_say_is_an_answer_not_a_failure(tmp_path, stub, answer, expected):
    installed(tmp_path)
    found = ni.server_part(host(Run({'systemctl': answer})), server(tmp_path, stub, manager='systemd'))['server']
    assert found['ready'] is False and found['cause'] == 'launch' and found['msg'].startswith(expected)


def test_no_config_no_server_and_nothing_asked(tmp_path, stub):
    run = Run()
    part = ni.server_part(host(run), server(tmp_path, stub, manager='systemd'))
    assert part == {'server_installed': False, 'server': {}, 'unit_text': ''} and run.calls == []


def test_the_read_creates_nothing(tmp_path, stub):
    (tmp_path / 'etc').mkdir()
    (tmp_path / 'etc' / 'sglang-server.yaml').write_text('')
    settings = server(tmp_path, stub, run_dir=str(tmp_path / 'no-run-dir'), log_path=str(tmp_path / 'no-log' / 'x.log'))
    ni.server_part(host(), settings)
    assert sorted(os.listdir(str(tmp_path))) == ['etc']


# -- the whole node --------------------------------------------------------------------------------
def test_a_bare_node_gives_every_part_empty(tmp_path, stub):
    params = {'cuda_home': str(tmp_path / 'cuda-13.0'), 'cuda_toolkit_root': str(tmp_path), 'ml_env_path': str(tmp_path / 'ml-env'),
              'runtime_env_spec': str(tmp_path / 'runtime-env.json'), 'gpu': True, 'state_dir': str(tmp_path / 'state'),
              'server': server(tmp_path, stub, manager='systemd')}
    found = ni.read_node(host(), params)
    assert found == {
        'cuda_home': str(tmp_path / 'cuda-13.0'), 'ptxas_stdout': '', 'cuda_version_json': '', 'toolkits_found': [],
        'ml_env_path': str(tmp_path / 'ml-env'), 'release': '', 'verified_marker': '', 'verify_json': '', 'pins_json': '',
        'dist_infos': [], 'runtime_env_json': '', 'gpu': dict((k, v) for k, v in no_gpu().items() if k != 'processes'),
        'server_installed': False, 'server': {}, 'unit_text': '', 'throughput_last_json': '', 'throughput_baseline_json': '',
        'environment_seen': None}


def test_settings_left_out_read_nothing():
    def never():
        raise AssertionError('no GPU read asked for')
    found = ni.read_node(host(gpu=never), {'gpu': False})
    assert found['cuda_home'] == '' and found['gpu'] == {} and found['server_installed'] is None and found['server'] is None
    assert found['throughput_last_json'] == found['runtime_env_json'] == ''


def test_throughput_records_as_text(tmp_path):
    (tmp_path / 'throughput-last.json').write_text('{"tokens_per_second": 95.4}\n')
    (tmp_path / 'throughput-baseline.json').write_text('not json')
    assert ni.throughput(host(), str(tmp_path)) == {'throughput_last_json': '{"tokens_per_second": 95.4}\n',
                                                    'throughput_baseline_json': 'not json'}
