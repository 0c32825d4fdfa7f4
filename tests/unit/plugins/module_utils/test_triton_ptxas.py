# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judging Triton's ptxas per target, on the probe's recorded answers (fixtures/triton/README.md).

The probe itself runs against real Triton and real CUDA 13 ptxas in tests/triton/ (make triton)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import triton_ptxas

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'fixtures', 'triton')
PTXAS = '/tmp/nvcc13/nvidia/cu13/bin/ptxas'  # where the recording's CUDA 13.0 ptxas was
ARCHS = ['sm_90', 'sm_100', 'sm_120']


def answer(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return json.load(handle)


def judge(name, archs=None):
    return triton_ptxas.judge(answer(name), archs or ARCHS, PTXAS, '13.0', realpath=lambda path: path)


def test_with_both_variables_every_target_is_assembled_by_the_toolkit():
    results, problems = judge('triton-3.6.0-both-paths.json')
    assert problems == []
    assert [(r['arch'], r['variable'], r['ptxas_release'], r['ptx_version'], r['ok']) for r in results] == [
        ('sm_90', 'TRITON_PTXAS_PATH', '13.0', '9.0', True),
        ('sm_100', 'TRITON_PTXAS_BLACKWELL_PATH', '13.0', '9.0', True),
        ('sm_120', 'TRITON_PTXAS_BLACKWELL_PATH', '13.0', '9.0', True)]


def test_without_the_blackwell_variable_triton_3_6_uses_its_own_ptxas_for_sm_100_and_up():
    results, problems = judge('triton-3.6.0-ptxas-path-only.json')
    assert [r['ok'] for r in results] == [True, False, False]
    assert len(problems) == 2
    assert problems[1].startswith('sm_120: Triton 3.6.0 assembles it with ')
    assert 'ptxas-blackwell (CUDA 12.9), not the toolkit\'s %s (CUDA 13.0)' % PTXAS in problems[1]
    assert 'set it to the toolkit\'s ptxas (runtime_env_ptxas_blackwell)' in problems[1]
    assert 'reads TRITON_PTXAS_BLACKWELL_PATH for this target' in problems[1]


def test_a_blackwell_path_triton_cannot_run_is_caught_though_the_variable_is_set():
    results, problems = judge('triton-3.6.0-blackwell-path-broken.json', ['sm_90', 'sm_120'])
    assert [r['ok'] for r in results] == [True, False]
    assert 'bundled ptxas' in problems[0]


def test_triton_3_5_reads_one_variable_for_every_target():
    results, problems = judge('triton-3.5.1-ptxas-path.json', ['sm_90', 'sm_120'])
    assert problems == []
    assert [r['variable'] for r in results] == ['TRITON_PTXAS_PATH', 'TRITON_PTXAS_PATH']


def test_the_same_file_by_another_name_is_the_toolkit_ptxas():
    # /usr/local/cuda-13.0/bin/ptxas is often a link into a versioned directory
    links = {'/usr/local/cuda/bin/ptxas': PTXAS}
    results, problems = triton_ptxas.judge(answer('triton-3.6.0-both-paths.json'), ARCHS, '/usr/local/cuda/bin/ptxas',
                                           '13.0', realpath=lambda path: links.get(path, path))
    assert problems == []


def test_the_same_file_of_another_release_is_refused():
    results, problems = triton_ptxas.judge(answer('triton-3.6.0-both-paths.json'), ['sm_90'], PTXAS, '12.9',
                                           realpath=lambda path: path)
    assert len(problems) == 1 and '(CUDA 13.0), not the toolkit\'s' in problems[0]


def test_a_ptx_isa_other_than_the_toolkits_is_refused():
    recorded = answer('triton-3.6.0-both-paths.json')
    recorded['archs'][0]['ptx_version'] = '8.7'  # e.g. TRITON_MOCK_PTX_VERSION or a ptx_version option
    results, problems = triton_ptxas.judge(recorded, ['sm_90'], PTXAS, '13.0', realpath=lambda path: path)
    assert problems == ["sm_90: the PTX Triton wrote is ISA 8.7, not 9.0 of CUDA 13.0's ptxas"]


def test_a_compile_error_and_a_missing_answer_are_named():
    recorded = {'triton': '3.6.0', 'archs': [{'capability': 90, 'error': 'RuntimeError: PTX .version 9.0 not supported'}]}
    results, problems = triton_ptxas.judge(recorded, ['sm_90', 'sm_120'], PTXAS, '13.0', realpath=lambda path: path)
    assert problems == ['sm_90: Triton 3.6.0 could not compile a kernel for it: RuntimeError: PTX .version 9.0 not supported',
                        'sm_120: the probe gave no answer for it']


def test_targets_below_sm_75_are_reported_unsupported_not_failed():
    results, problems = triton_ptxas.judge({'triton': '3.6.0', 'archs': []}, ['sm_70'], PTXAS, '13.0')
    assert problems == [] and results[0]['supported'] is False and results[0]['ok'] is True


@pytest.mark.parametrize('release, isa', [('12.4', '8.4'), ('12.8', '8.7'), ('12.9', '8.8'), ('13.0', '9.0'),
                                          ('13.1', '9.1'), ('14.0', '10.0'), ('11.8', None), ('x', None)])
def test_ptx_isa_follows_tritons_ptx_get_version(release, isa):
    assert triton_ptxas.ptx_isa(release) == isa


def test_capabilities_drop_suffixes_and_repeats():
    assert triton_ptxas.capabilities(['sm_120a', 'sm_90', 'sm_120f', 'sm_120']) == [('sm_120a', 120), ('sm_90', 90)]


def test_the_probe_runs_without_the_callers_ptxas_variables():
    argv = triton_ptxas.probe_argv('/opt/ml-env/bin/python', '/tmp/p.py', '/tmp/r.json')
    assert argv == ['env', '-u', 'TRITON_PTXAS_PATH', '-u', 'TRITON_PTXAS_BLACKWELL_PATH', '/opt/ml-env/bin/python', '-B',
                    '/tmp/p.py', '/tmp/r.json']


def test_the_answer_is_the_last_json_line():
    assert triton_ptxas.parse_answer('warning: x\n{"triton": null, "error": "e"}\n') == {'triton': None, 'error': 'e'}
    assert triton_ptxas.parse_answer('Traceback ...\n') is None
