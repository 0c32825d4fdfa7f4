# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NCCL smoke runner with the real rank script, on CPU through the fake torch in
tests/fixtures/nccl_standin: real processes, real deadlines, faults chosen by NCCL_STANDIN_FAULT."""

from __future__ import annotations

import ast
import math
import os
import subprocess
import sys
import time
import types
import zipfile

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.gpu import nccl_smoke
from ansible_collections.inferops.gpu.plugins.module_utils.gpu import nccl_smoke_rank
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.nccl_smoke import (
    HANG_FIX, RankLog, rank_env, rank_script_source, run_smoke,
)
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.launch import LaunchError
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.launch import spawn as real_spawn

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
STANDIN = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'nccl_standin')
MODULE_UTILS = os.path.join(REPO_ROOT, 'plugins', 'module_utils')
SMALL = 4096  # the stand-in's tensors are Python lists


def processes_mentioning(text):
    """PIDs whose command line holds `text` (the rank script lives in the run's tempdir)."""
    found = []
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % name, 'rb') as handle:
                cmdline = handle.read().decode('utf-8', 'replace')
        except OSError:
            continue
        if text in cmdline:
            found.append(int(name))
    return found


@pytest.fixture
def smoke(tmp_path):
    """run_smoke with the stand-in; checks afterwards that no rank and no tempdir is left."""
    work = tmp_path / 'work'
    work.mkdir()

    def run(world_size, fault='', deadline_s=20, python=sys.executable, **kwargs):
        env = {'PYTHONPATH': STANDIN, 'NCCL_STANDIN_DIR': str(tmp_path / 'rdv'), 'NCCL_STANDIN_FAULT': fault}
        env.update(kwargs.pop('env', {}))
        kwargs.setdefault('size_bytes', SMALL)
        kwargs.setdefault('iters', 3)
        return run_smoke(python, world_size, deadline_s=deadline_s, env=env, workdir=str(work), **kwargs)

    yield run
    assert processes_mentioning(str(work)) == []
    assert os.listdir(str(work)) == []


def assert_shape(result):
    assert set(result) == {'status', 'value', 'summary', 'problems', 'hint'}
    assert set(result['value']) == {'world_size', 'seconds', 'busbw_gbps', 'size_bytes', 'sum', 'expected', 'ranks',
                                    'outcome', 'log_tail', 'nccl_version'}
    assert result['status'] in ('ok', 'warn', 'fail', 'skipped')
    assert '\n' not in result['summary'] and all('\n' not in p for p in result['problems'])
    assert bool(result['problems']) == (result['status'] == 'fail')


@pytest.mark.parametrize('world_size', [2, 4])
def test_a_healthy_all_reduce_is_ok_with_the_sum_and_a_bandwidth(smoke, world_size):
    result = smoke(world_size)
    assert_shape(result)
    value = result['value']
    assert result['status'] == 'ok' and value['outcome'] == 'ok', result
    expected = world_size * (world_size + 1) // 2
    assert value['sum'] == value['expected'] == expected
    assert isinstance(value['busbw_gbps'], float) and value['busbw_gbps'] >= 0
    assert 0 < value['seconds'] < 20 and value['size_bytes'] == SMALL and value['world_size'] == world_size
    assert value['ranks'] == dict((r, 'done') for r in range(world_size))
    assert any('NCCL INFO' in line and 'Init COMPLETE' in line for line in value['log_tail'])
    assert result['problems'] == [] and result['hint'] == ''
    assert 'sum %d as expected' % expected in result['summary']
    # The stand-in's torch.cuda.nccl.version() is (2, 28, 9), torch 2.11's NCCL.
    assert value['nccl_version'] == '2.28.9'
    assert result['summary'].startswith('NCCL 2.28.9 all-reduce smoke test over %d GPUs: ' % world_size)


@pytest.mark.parametrize('env, version', [
    ({'NCCL_STANDIN_NCCL_VERSION': '2.26.2'}, '2.26.2'),
    # Old torch answers NCCL's version code, an int.
    ({'NCCL_STANDIN_NCCL_VERSION': '2.27.5', 'NCCL_STANDIN_NCCL_INT': '1'}, '2.27.5'),
])
def test_the_report_names_the_nccl_the_ranks_loaded(smoke, env, version):
    result = smoke(2, env=env)
    assert result['status'] == 'ok' and result['value']['nccl_version'] == version
    assert result['summary'].startswith('NCCL %s all-reduce smoke test over 2 GPUs: sum 3 as expected' % version)


def test_a_hang_is_killed_at_the_deadline_with_where_each_rank_stopped(smoke):
    started = time.monotonic()
    result = smoke(2, fault='hang', deadline_s=3)
    assert time.monotonic() - started < 3 + 2
    assert_shape(result)
    value = result['value']
    assert result['status'] == 'fail' and value['outcome'] == 'hang'
    assert value['ranks'] == {0: 'init', 1: 'init'}
    (problem,) = result['problems']
    assert problem.startswith('no progress in ')
    assert ('s: peer-to-peer blocked? (ACS/IOMMU); rerun with NCCL_P2P_DISABLE=1 to confirm' in problem)
    assert 'rank 0 init, rank 1 init' in problem
    quiet = int(problem.split()[3])
    assert 1 <= quiet <= 4  # the ranks printed their last line soon after the start (slower under load)
    assert result['hint'] == HANG_FIX
    # Said before the rendezvous: a hang is reported with the NCCL that hung.
    assert value['nccl_version'] == '2.28.9'
    assert result['summary'] == 'NCCL 2.28.9 all-reduce smoke test over 2 GPUs: hung, killed at the 3 s deadline'
    assert value['log_tail'] and all('NCCL' in line for line in value['log_tail'])
    assert any(line.startswith('[rank 0]') and 'Bootstrap' in line for line in value['log_tail'])
    assert value['sum'] is None and value['busbw_gbps'] is None


def test_a_hang_before_nccl_prints_anything_shows_the_ranks_own_lines(smoke):
    result = smoke(2, fault='hang', deadline_s=2, env={'NCCL_DEBUG': 'WARN'})
    assert result['value']['outcome'] == 'hang'
    assert '[rank 0] SMOKE phase init' in result['value']['log_tail']


def test_a_slow_run_that_misses_the_deadline_shows_how_far_it_got(smoke):
    result = smoke(2, fault='slow', deadline_s=1.5)
    assert result['value']['outcome'] == 'hang'
    phases = set(result['value']['ranks'].values())
    assert phases <= {'init', 'allreduce', 'bandwidth'} and phases != {'init'}  # past the rendezvous, not done
    assert int(result['problems'][0].split()[3]) <= 1  # progress was recent: N counts from the last line


def test_a_crashing_rank_ends_the_run_at_once_with_its_last_lines(smoke):
    started = time.monotonic()
    result = smoke(2, fault='crash', deadline_s=20)
    assert time.monotonic() - started < 10  # not the deadline: rank 0 would have waited for rank 1 forever
    assert_shape(result)
    value = result['value']
    assert result['status'] == 'fail' and value['outcome'] == 'crash'
    assert value['ranks'][1] == 'allreduce'
    (problem,) = result['problems']  # rank 0 was killed by the runner, not counted as a crash
    assert problem.startswith('rank 1 exited with status 1 in phase allreduce: ')
    assert 'peer access is not supported' in problem
    assert value['nccl_version'] == '2.28.9' and result['summary'].startswith('NCCL 2.28.9 all-reduce smoke test')
    assert any('NCCL WARN' in line for line in value['log_tail'])
    assert any('DistBackendError' in line for line in value['log_tail'])
    assert 'log_tail' in result['hint']


def test_a_wrong_sum_fails_although_every_rank_looks_fine(smoke):
    # The stand-in adds 1 to every element: uniform, exit 0, a result line on each rank. Only the
    # runner's own sum check can see it.
    result = smoke(2, fault='wrong_sum')
    assert_shape(result)
    value = result['value']
    assert result['status'] == 'fail' and value['outcome'] == 'wrong_sum'
    assert value['ranks'] == {0: 'done', 1: 'done'}
    assert value['sum'] == 4 and value['expected'] == 3
    assert result['problems'][0].startswith('all-reduce returned 4.0 on rank 0, expected 3: ')
    assert len(result['problems']) == 2 and 'NCCL_P2P_DISABLE=1' in result['hint']


def test_a_rank_that_exits_0_without_a_result_fails(smoke, tmp_path):
    fake = tmp_path / 'python'
    fake.write_text('#!/bin/sh\necho "SMOKE phase init"\nexit 0\n')
    fake.chmod(0o755)
    result = smoke(2, python=str(fake))
    assert_shape(result)
    assert result['status'] == 'fail' and result['value']['outcome'] == 'no_result'
    assert result['problems'][0].startswith('rank 0 exited 0 without a SMOKE result line (none; last phase init)')
    assert result['value']['log_tail'] == ['SMOKE phase init', 'SMOKE phase init']
    # No rank loaded torch: no NCCL to name.
    assert result['value']['nccl_version'] is None
    assert result['summary'] == 'NCCL all-reduce smoke test over 2 GPUs: no result'


def test_a_rank_killed_by_a_signal_is_a_crash(smoke, tmp_path):
    fake = tmp_path / 'python'
    fake.write_text('#!/bin/sh\necho "SMOKE phase init"\nif [ "$RANK" = 1 ]; then kill -SEGV $$; fi\nsleep 30\n')
    fake.chmod(0o755)
    started = time.monotonic()
    result = smoke(2, python=str(fake))
    assert time.monotonic() - started < 10
    assert result['value']['outcome'] == 'crash'
    assert result['problems'] == ['rank 1 killed by signal SIGSEGV in phase init: SMOKE phase init']


@pytest.mark.parametrize('kind', ['missing', 'not_executable', 'bare_name'])
def test_a_missing_python_is_not_started_and_names_the_fix(smoke, tmp_path, kind):
    path = {'missing': str(tmp_path / 'venv' / 'bin' / 'python'), 'not_executable': str(tmp_path / 'python'),
            'bare_name': 'no-such-python-here'}[kind]
    if kind == 'not_executable':
        (tmp_path / 'python').write_text('')
    result = smoke(2, python=path)
    assert_shape(result)
    assert result['status'] == 'fail' and result['value']['outcome'] == 'not_started'
    assert result['problems'] == ['python %s is missing or not executable: %s' % (path, nccl_smoke.NOT_STARTED_FIX)]
    assert 'ml_env' in result['hint']


def test_a_rank_that_cannot_start_stops_the_ones_already_started(smoke):
    started = []

    def spawn(argv, env, cwd, log_fd):
        if env['RANK'] == '1':
            raise LaunchError('cannot run %s: [Errno 13] Permission denied' % argv[0])
        started.append(real_spawn(argv, env, cwd, log_fd))
        return started[-1]

    result = smoke(2, fault='hang', spawn=spawn)  # rank 0 would wait for rank 1 forever
    assert result['value']['outcome'] == 'not_started'
    assert result['problems'][0].startswith('rank 1: cannot run ')
    assert len(started) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(started[0], os.WNOHANG)  # killed and reaped


def test_no_gpu_is_skipped():
    result = run_smoke(sys.executable, 0)
    assert_shape(result)
    assert result['status'] == 'skipped' and result['value']['outcome'] == 'skipped' and result['problems'] == []


def test_the_rank_environment():
    base = {'PATH': '/usr/bin', 'NCCL_DEBUG': 'WARN', 'RANK': '7'}
    env = rank_env(base, {'NCCL_P2P_DISABLE': '1'}, 1, 2, 29511, 1024, 5)
    assert env['NCCL_DEBUG'] == 'INFO'  # the controller's own setting would hide the hang report's lines
    assert (env['RANK'], env['LOCAL_RANK'], env['WORLD_SIZE'], env['MASTER_ADDR'], env['MASTER_PORT']) == (
        '1', '1', '2', '127.0.0.1', '29511')
    assert (env['SMOKE_SIZE_BYTES'], env['SMOKE_ITERS'], env['NCCL_P2P_DISABLE'], env['PATH']) == (
        '1024', '5', '1', '/usr/bin')
    assert rank_env(base, {'NCCL_DEBUG': 'TRACE'}, 0, 2, 1, 1, 1)['NCCL_DEBUG'] == 'TRACE'
    assert base['NCCL_DEBUG'] == 'WARN'


def test_the_rank_log_reader(tmp_path):
    path = tmp_path / 'rank0.log'
    log = RankLog(0, str(path))
    assert log.read() == [] and log.phase == 'start'
    path.write_text('SMOKE phase init\nhost:1:1 [0] NCCL INFO Boot')
    assert log.read() == ['SMOKE phase init'] and log.phase == 'init'
    with open(str(path), 'a') as handle:
        handle.write('strap\nSMOKE result {"rank": 0, "sum": NaN, "busbw_gbps": 1.5, "seconds": 2}\nSMOKE result [')
    assert log.read() == ['host:1:1 [0] NCCL INFO Bootstrap', log.tail[-1]]
    assert log.phase == 'done' and math.isnan(log.result['sum']) and log.bad_result is None
    assert log.read(final=True) == ['SMOKE result ['] and log.bad_result == 'SMOKE result ['
    assert log.nccl_version is None
    with open(str(path), 'a') as handle:
        handle.write('\nSMOKE nccl 2.28.9\n')
    log.read()
    assert log.nccl_version == '2.28.9'


@pytest.mark.parametrize('answer, text', [
    # torch 2.11.0+cu130 on the 2x H200 host answered a tuple of three
    # (tests/gpu/results/nccl_decode_h200_1gpu/results.txt: "nccl": "2.28.9").
    ((2, 28, 9), '2.28.9'),
    ((2, 27, 3, 'a0'), '2.27.3a0'),  # a build with NCCL_SUFFIX, torch's fourth item
    # Old torch: NCCL's version code, major * 10000 + minor * 100 + patch since NCCL 2.9, * 1000 before.
    (22809, '2.28.9'),
    (22602, '2.26.2'),
    (2708, '2.7.8'),
])
def test_the_nccl_release_as_torch_answers_it(answer, text):
    assert nccl_smoke_rank.nccl_release(answer) == text


def test_a_torch_without_nccl_says_no_release(capsys, monkeypatch):
    # A CPU build has no torch._C._nccl_version; its init_process_group('nccl') says what is wrong in torch's words.
    def version():
        raise AttributeError("module 'torch._C' has no attribute '_nccl_version'")

    cuda = types.ModuleType('torch.cuda')
    cuda.nccl = types.SimpleNamespace(version=version)
    monkeypatch.setitem(sys.modules, 'torch', types.ModuleType('torch'))
    monkeypatch.setitem(sys.modules, 'torch.cuda', cuda)
    nccl_smoke_rank.say_nccl()
    assert capsys.readouterr().out == ''
    cuda.nccl.version = lambda: (2, 30, 7)
    nccl_smoke_rank.say_nccl()
    assert capsys.readouterr().out == 'SMOKE nccl 2.30.7\n'


def test_a_nan_sum_is_wrong():
    logs = [RankLog(r, '/nonexistent') for r in range(2)]
    logs[0].result = {'rank': 0, 'sum': float('nan'), 'busbw_gbps': 1.0}
    logs[1].result = {'rank': 1, 'sum': 3.0, 'busbw_gbps': None}
    outcome, problems, dummy, reduced = nccl_smoke._judge(logs, 2, 3)
    assert outcome == 'wrong_sum' and reduced is None
    assert problems == ['all-reduce returned NaN on rank 0, expected 3: ' + nccl_smoke.WRONG_SUM_FIX]


def test_the_rank_script_source_is_the_file_and_imports_torch_only_in_main():
    with open(os.path.join(MODULE_UTILS, 'gpu', 'nccl_smoke_rank.py')) as handle:
        on_disk = handle.read()
    assert rank_script_source() == on_disk
    tree = ast.parse(on_disk)
    top_imports = [a.name for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
                   for a in node.names] + [node.module for node in tree.body if isinstance(node, ast.ImportFrom)]
    assert not [name for name in top_imports if name and name.startswith('torch')]
    guard = tree.body[-1]
    assert isinstance(guard, ast.If) and ast.unparse(guard.test) == "__name__ == '__main__'"
    assert nccl_smoke_rank.bus_bandwidth_gbps(1e9, 1.0, 2) == 1.0 and nccl_smoke_rank.bus_bandwidth_gbps(1, 1, 1) == 0


def test_the_rank_script_source_without_inspect(monkeypatch):
    def no_source(module):
        raise OSError('could not get source code')
    monkeypatch.setattr(nccl_smoke.inspect, 'getsource', no_source)
    with open(os.path.join(MODULE_UTILS, 'gpu', 'nccl_smoke_rank.py')) as handle:
        assert rank_script_source() == handle.read()
    monkeypatch.setattr(nccl_smoke_rank, '__loader__', None)
    with pytest.raises(LaunchError, match='cannot be read'):
        rank_script_source()


def test_an_unreadable_rank_script_is_not_started(smoke, monkeypatch):
    def unreadable():
        raise LaunchError('the NCCL smoke rank script (nccl_smoke_rank.py) cannot be read')
    monkeypatch.setattr(nccl_smoke, 'rank_script_source', unreadable)
    result = smoke(2)
    assert result['value']['outcome'] == 'not_started' and 'reinstall' in result['problems'][0]


@pytest.mark.parametrize('use_inspect', [True, False])
def test_the_rank_script_source_comes_out_of_a_zip_like_ansiballz(tmp_path, use_inspect):
    # AnsiballZ imports module_utils from a zip: inspect and pkgutil must read the script through zipimport.
    archive = str(tmp_path / 'payload.zip')
    package = 'ansible_collections/inferops/gpu/plugins/module_utils/'
    with zipfile.ZipFile(archive, 'w') as zf:
        for part in ('ansible_collections/', 'ansible_collections/inferops/', 'ansible_collections/inferops/gpu/',
                     'ansible_collections/inferops/gpu/plugins/', package, package + 'gpu/', package + '_common/'):
            zf.writestr(part + '__init__.py', '')
        for name in ('gpu/nccl_smoke.py', 'gpu/nccl_smoke_rank.py', '_common/spawn.py', 'gpu/health_checks.py',
                     'gpu/health_parse.py', 'gpu/nvidia_smi.py'):
            zf.write(os.path.join(MODULE_UTILS, name), package + name)
    code = ('import sys; sys.path.insert(0, %r)\n'
            'from ansible_collections.inferops.gpu.plugins.module_utils.gpu import nccl_smoke\n'
            'assert nccl_smoke.__file__.startswith(%r), nccl_smoke.__file__\n'
            'if not %r:\n'
            '    nccl_smoke.inspect.getsource = None  # TypeError: the loader.get_data path\n'
            'sys.stdout.write(nccl_smoke.rank_script_source())\n' % (archive, archive, use_inspect))
    out = subprocess.run([sys.executable, '-I', '-c', code], capture_output=True, text=True, timeout=30, check=True)
    with open(os.path.join(MODULE_UTILS, 'gpu', 'nccl_smoke_rank.py')) as handle:
        assert out.stdout == handle.read()
