# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every module bounds the commands it runs: a stand-in that sleeps is killed at command_timeout
and the failure names the command and the limit. Real run_command, real timeout(1)."""

from __future__ import annotations

import os
import shutil
import sys
import time

import pytest

from module_harness import invoke, patch_exits
from ansible_collections.inferops.gpu.plugins.modules import (
    cuda_toolkit_verify,
    cuda_toolkit_wheels,
    gpu_info,
    ml_env_check,
)

pytestmark = pytest.mark.skipif(not shutil.which('timeout'), reason='needs timeout(1)')
LIMIT = 1


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    patch_exits(monkeypatch)


def sleeper(path, pidfile=None):
    """An executable that would sleep for five minutes; with pidfile, its child sleeps too."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    child = 'sleep 300 & echo $! > %s\n' % pidfile if pidfile else ''
    with open(path, 'w') as handle:
        handle.write('#!/bin/sh\n%sexec sleep 300\n' % child)
    os.chmod(path, 0o755)
    return path


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with open('/proc/%d/stat' % pid) as handle:
        return handle.read().split()[2] != 'Z'


def assert_killed_in_time(module, args, command, limit=LIMIT):
    started = time.monotonic()
    result = invoke(module, dict(args, command_timeout=limit))
    elapsed = time.monotonic() - started
    assert result['failed']
    assert '`%s' % command in result['msg'] and 'within %d s' % limit in result['msg'], result['msg']
    assert 'command_timeout' in result['msg']
    assert elapsed < limit + 4, elapsed
    return result


def test_gpu_info_hung_nvidia_smi_and_its_children_are_killed(tmp_path):
    pidfile = str(tmp_path / 'child.pid')
    smi = sleeper(str(tmp_path / 'bin' / 'nvidia-smi'), pidfile)
    result = assert_killed_in_time(gpu_info, {'backend': 'nvidia-smi', 'nvidia_smi_path': smi}, smi)
    assert 'fell off the bus' in result['msg']
    with open(pidfile) as handle:
        child = int(handle.read())
    deadline = time.monotonic() + 2
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_ml_env_check_hung_nm(tmp_path, monkeypatch):
    nm = sleeper(str(tmp_path / 'bin' / 'nm'))
    monkeypatch.setenv('PATH', '%s:%s' % (os.path.dirname(nm), os.environ['PATH']))
    import _ctypes  # any ELF extension module gives nm something to read
    # The real interpreter's probe runs first under the same limit: on a loaded 2-core machine (CI,
    # three scenarios beside) it took over 1 s and was the command killed, not nm.
    assert_killed_in_time(ml_env_check, {'python': sys.executable, 'extension_globs': [_ctypes.__file__]}, nm, limit=10)


def test_ml_env_check_hung_interpreter(tmp_path):
    python = sleeper(str(tmp_path / 'venv' / 'bin' / 'python'))
    assert_killed_in_time(ml_env_check, {'python': python, 'stage': 'precheck'}, python)


def test_cuda_toolkit_verify_hung_ptxas(tmp_path):
    ptxas = sleeper(str(tmp_path / 'cuda' / 'bin' / 'ptxas'))
    result = assert_killed_in_time(cuda_toolkit_verify, {'home': str(tmp_path / 'cuda'), 'version': '13.0',
                                                         'ptxas': ptxas, 'compile': 'none'}, ptxas)
    assert result['step'] == 'ptxas --version'


def test_cuda_toolkit_wheels_hung_pip_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda_toolkit_wheels.AnsibleModule, 'tmpdir', str(tmp_path), raising=False)
    python = sleeper(str(tmp_path / 'venv' / 'bin' / 'python'))
    home = tmp_path / 'cuda-13.0'
    args = {'home': str(home), 'version': '13.0', 'python': python, 'index_url': '',
            'find_links': [str(tmp_path)], 'layout': {'kind': 'cu13', 'required': ['bin/ptxas']},
            'wheels': [{'name': 'nvidia-cuda-nvcc', 'version': '13.0.88', 'sha256': ['56fe' * 16]}]}
    result = assert_killed_in_time(cuda_toolkit_wheels, args, python)
    assert 'pip could not install' in result['msg']
    assert os.listdir(str(home)) == []


def test_a_quick_command_is_untouched(tmp_path):
    result = invoke(ml_env_check, {'python': sys.executable, 'stage': 'precheck', 'command_timeout': 30})
    assert not result.get('failed'), result['msg']
    assert result['python_version'] == '%d.%d.%d' % sys.version_info[:3]


def test_timeout_binary_is_required(monkeypatch):
    from ansible.module_utils import basic
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **k: None)
    result = invoke(ml_env_check, {'python': sys.executable, 'stage': 'precheck'})
    assert result['failed'] and 'timeout(1)' in result['msg']


def test_exit_124_before_the_limit_is_not_a_timeout(tmp_path):
    python = str(tmp_path / 'py')
    with open(python, 'w') as handle:
        handle.write('#!/bin/sh\necho broken >&2\nexit 124\n')
    os.chmod(python, 0o755)
    result = invoke(ml_env_check, {'python': python, 'stage': 'precheck', 'command_timeout': 30})
    assert result['failed'] and 'does not run (rc=124)' in result['msg']


@pytest.mark.parametrize('module, args', [
    (gpu_info, {}),
    (ml_env_check, {'python': sys.executable, 'stage': 'precheck'}),
    (cuda_toolkit_verify, {'home': '/nonexistent', 'version': '13.0', 'ptxas': '/nonexistent/ptxas'}),
], ids=['gpu_info', 'ml_env_check', 'cuda_toolkit_verify'])
def test_a_limit_of_zero_is_refused(module, args):
    result = invoke(module, dict(args, command_timeout=0))
    assert result['failed'] and result['msg'] == 'command_timeout must be at least 1 second (got 0)'
