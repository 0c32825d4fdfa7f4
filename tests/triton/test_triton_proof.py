# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""runtime_env's Triton proof against the real thing (make triton; tools/triton-proof.sh makes the
venv): torch 2.11's Triton 3.6.0 and CUDA 13.0's ptxas from NVIDIA's wheel, no GPU. The role's spec,
hook and verify tasks (prove.yml): with the spec as the role renders it every target is assembled by
CUDA 13.0's ptxas; without TRITON_PTXAS_BLACKWELL_PATH (runtime_env_ptxas_blackwell empty), Triton
assembles SM100 and SM120 with its own CUDA 12.9 ptxas-blackwell, and the proof fails naming them."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV = os.environ.get('TRITON_VENV', os.path.join(ROOT, '.build', 'venv-triton'))
PTXAS = os.path.join(VENV, 'lib', 'python3.12', 'site-packages', 'nvidia', 'cu13', 'bin', 'ptxas')

pytestmark = pytest.mark.skipif(not os.path.exists(PTXAS), reason='no Triton venv: make triton builds it')


def prove(tmp_path, *extra):
    spec = tmp_path / 'runtime-env.json'
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK='ansible.builtin.json', ANSIBLE_LOAD_CALLBACK_PLUGINS='1')
    for name in ('TRITON_PTXAS_PATH', 'TRITON_PTXAS_BLACKWELL_PATH'):
        env.pop(name, None)
    proc = subprocess.run(['ansible-playbook', '-i', 'localhost,', os.path.join(ROOT, 'tests', 'triton', 'prove.yml'),
                           '-e', 'triton_venv=%s' % VENV, '-e', 'spec_path=%s' % spec] + list(extra),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    report = json.loads(proc.stdout)
    results = [result for play in report['plays'] for task in play['tasks'] for result in task['hosts'].values()
               if 'ptxas_release' in result]  # the triton_ptxas task's
    assert len(results) == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc.returncode, json.loads(spec.read_text())['vars'], results[0]


def test_with_the_spec_as_rendered_every_target_is_assembled_by_cuda_13(tmp_path):
    rc, spec, result = prove(tmp_path)
    assert spec['TRITON_PTXAS_PATH'] == PTXAS and spec['TRITON_PTXAS_BLACKWELL_PATH'] == PTXAS
    assert rc == 0, result.get('msg')
    assert result['triton'] == '3.6.0' and result['ptxas_release'] == '13.0'
    assert [(a['arch'], a['ptxas'], a['ptxas_release'], a['ptx_version'], a['ok']) for a in result['archs']] == [
        ('sm_90', PTXAS, '13.0', '9.0', True), ('sm_100', PTXAS, '13.0', '9.0', True), ('sm_120', PTXAS, '13.0', '9.0', True)]


def test_without_the_blackwell_variable_sm_100_and_sm_120_fail(tmp_path):
    rc, spec, result = prove(tmp_path, '-e', 'runtime_env_ptxas_blackwell=')
    assert 'TRITON_PTXAS_BLACKWELL_PATH' not in spec and spec['TRITON_PTXAS_PATH'] == PTXAS
    assert rc != 0 and result['failed']
    assert [(a['arch'], a['ok'], a['ptxas_release']) for a in result['archs']] == [
        ('sm_90', True, '13.0'), ('sm_100', False, '12.9'), ('sm_120', False, '12.9')]
    assert all(a['ptxas'].endswith('/triton/backends/nvidia/bin/ptxas-blackwell') for a in result['archs'][1:])
    assert 'sm_120: Triton 3.6.0 assembles it with ' in result['msg'] and 'runtime_env_ptxas_blackwell' in result['msg']
