# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The triton_ptxas module through AnsibleModule with real run_command and timeout(1): interpreters
that answer as the probe does (the real probe against real Triton is tests/triton/, make triton)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time

import pytest
import yaml

from module_harness import invoke, patch_exits
from ansible_collections.inferops.gpu.plugins.modules import triton_ptxas

pytestmark = pytest.mark.skipif(not shutil.which('timeout'), reason='needs timeout(1)')
RELEASE = 'Cuda compilation tools, release 13.0, V13.0.88'


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    patch_exits(monkeypatch)


def executable(path, text):
    with open(str(path), 'w') as handle:
        handle.write(text)
    os.chmod(str(path), 0o755)
    return str(path)


def toolkit(tmp_path):
    return executable(tmp_path / 'ptxas', '#!/bin/sh\necho "ptxas: NVIDIA (R) Ptx optimizing assembler"\necho "%s"\n' % RELEASE)


def interpreter(tmp_path, answer):
    """A python that answers like the probe (and records its argv and the ptxas variables it got)."""
    (tmp_path / 'answer.json').write_text(json.dumps(answer))
    return executable(tmp_path / 'python', '#!/bin/sh\necho "$@ ${TRITON_PTXAS_PATH:-unset} ${TRITON_PTXAS_BLACKWELL_PATH:-unset}" '
                      '> %s\ncat %s\n' % (tmp_path / 'argv', tmp_path / 'answer.json'))


def entry(capability, ptxas, release='13.0'):
    return {'capability': capability, 'ptxas': ptxas, 'ptxas_release': release,
            'ptx_version': '9.0' if release == '13.0' else '8.8', 'ptx_target': 'sm_%da' % capability, 'cubin_bytes': 8000}


def test_every_target_assembled_by_the_toolkit_passes(tmp_path, monkeypatch):
    ptxas = toolkit(tmp_path)
    python = interpreter(tmp_path, {'triton': '3.6.0', 'archs': [entry(90, ptxas), entry(120, ptxas)]})
    monkeypatch.setenv('TRITON_PTXAS_PATH', '/elsewhere/ptxas')  # the caller's own value must not reach the probe
    result = invoke(triton_ptxas, {'python': python, 'ptxas': ptxas, 'archs': ['sm_90', 'sm_120']})
    assert 'failed' not in result, result['msg']
    assert result['changed'] is False and result['triton'] == '3.6.0' and result['ptxas_release'] == '13.0'
    assert result['msg'] == 'Triton 3.6.0 assembles sm_90, sm_120 with %s (CUDA 13.0)' % ptxas
    argv = (tmp_path / 'argv').read_text().split()
    assert argv[0] == '-B' and argv[1].endswith('/probe.py') and argv[2].endswith('/request.json')
    assert argv[3:] == ['unset', 'unset']


def test_sm_120_with_tritons_own_ptxas_fails_naming_the_variable(tmp_path):
    ptxas = toolkit(tmp_path)
    bundled = '/opt/ml-env/lib/python3.12/site-packages/triton/backends/nvidia/bin/ptxas-blackwell'
    python = interpreter(tmp_path, {'triton': '3.6.0', 'archs': [entry(90, ptxas), entry(120, bundled, '12.9')]})
    result = invoke(triton_ptxas, {'python': python, 'ptxas': ptxas, 'archs': ['sm_90', 'sm_120']})
    assert result['failed']
    assert result['msg'].startswith('Triton 3.6.0 in %s does not assemble with the toolkit\'s ptxas: sm_120: ' % python)
    assert 'TRITON_PTXAS_BLACKWELL_PATH' in result['msg'] and 'runtime_env_ptxas_blackwell' in result['msg']
    assert [a['ok'] for a in result['archs']] == [True, False]


def test_a_venv_without_triton_has_nothing_to_prove(tmp_path):
    # The real probe in this interpreter (the test venv has no Triton); the toolkit is not even looked at.
    result = invoke(triton_ptxas, {'python': sys.executable, 'ptxas': str(tmp_path / 'no-ptxas')})
    assert 'failed' not in result, result.get('msg')
    assert result['triton'] == '' and 'nothing to prove' in result['msg'] and "No module named 'triton'" in result['msg']


def test_an_interpreter_that_answers_nothing_fails_with_its_output(tmp_path):
    python = executable(tmp_path / 'python', '#!/bin/sh\necho "Traceback: boom" >&2\nexit 1\n')
    result = invoke(triton_ptxas, {'python': python, 'ptxas': toolkit(tmp_path)})
    assert result['failed'] and 'gave no answer (rc=1): Traceback: boom' in result['msg']


def test_a_hung_probe_is_killed_at_the_limit(tmp_path):
    python = executable(tmp_path / 'python', '#!/bin/sh\nexec sleep 300\n')
    started = time.monotonic()
    result = invoke(triton_ptxas, {'python': python, 'ptxas': toolkit(tmp_path), 'command_timeout': 1})
    assert result['failed'] and 'within 1 s' in result['msg'] and 'command_timeout' in result['msg']
    assert time.monotonic() - started < 5


@pytest.mark.parametrize('args, text', [
    ({'python': 'bin/python'}, 'python must be an absolute path (got "bin/python")'),
    ({'archs': ['sm_120', 'compute_120']}, 'archs: "compute_120" is not an architecture sm_XX'),
])
def test_bad_arguments_fail_before_anything_runs(tmp_path, args, text):
    result = invoke(triton_ptxas, dict({'python': '/nonexistent/python', 'ptxas': '/nonexistent/ptxas'}, **args))
    assert result['failed'] and text in result['msg']


def test_documentation():
    doc = yaml.safe_load(triton_ptxas.DOCUMENTATION)
    assert doc['module'] == 'triton_ptxas' and 'inferops.gpu.attributes.read_only' in doc['extends_documentation_fragment']
    assert set(yaml.safe_load(triton_ptxas.RETURN)) == {'triton', 'ptxas_release', 'archs'}
    yaml.safe_load(triton_ptxas.EXAMPLES)
