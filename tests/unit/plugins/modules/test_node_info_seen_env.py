# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report's column of what the server's Python sees (issue 42): a real venv's interpreter started as a unit
file says (its EnvironmentFile= and Environment= lines, its working directory), held against runtime_env's spec."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.fleet.node_info import Host
from ansible_collections.inferops.gpu.plugins.module_utils.fleet.seen_env import seen_part
from module_harness import make_venv

SPEC = {'vars': {'CUDA_HOME': '/usr/local/cuda-13.0', 'SGLANG_DISABLE_CUDNN_CHECK': '1'},
        'path_prepend': ['/usr/local/cuda-13.0/bin']}


def run(argv, data=None, binary_data=False):
    done = subprocess.run(argv, input=data.encode() if data else None, capture_output=True, timeout=120, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@pytest.fixture
def node(tmp_path):
    python, site = make_venv(tmp_path / 'venv')
    runtime = tmp_path / 'runtime-env.env'
    runtime.write_text('CUDA_HOME=/usr/local/cuda-13.0\nSGLANG_DISABLE_CUDNN_CHECK=1\n'
                       'PATH=/usr/local/cuda-13.0/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n')
    own = tmp_path / 'sglang-server.env'
    own.write_text('HF_TOKEN=hf_secret\n')
    unit = ('[Service]\nWorkingDirectory=%s\nEnvironmentFile=%s\nEnvironmentFile=%s\nEnvironment="HF_HOME=/var/lib/x y"\n'
            'ExecStart=%s -m sglang.launch_server --model-path /m\n' % (tmp_path, runtime, own, python))
    return {'site': site, 'own': own, 'unit': unit}


def seen(unit):
    return seen_part(Host(run, None, None), unit, json.dumps(SPEC))['environment_seen']


def test_a_clean_release_sees_the_spec(node):
    assert seen(node['unit']) == {'differs': [], 'problems': [], 'error': ''}


def test_a_hand_edit_is_named_with_its_place_and_the_units_own_override_is_not(node):
    with open(os.path.join(node['site'], 'sitecustomize.py'), 'w') as handle:
        handle.write('import os\nos.environ["CUDA_HOME"] = "/usr/local/cuda-12.8"\n')
    # The unit's own file sets a spec variable on purpose: the unit gives that value, so it is what it must see.
    node['own'].write_text('SGLANG_DISABLE_CUDNN_CHECK=0\n')
    found = seen(node['unit'])
    assert found['differs'] == ['CUDA_HOME=/usr/local/cuda-12.8 (%s line 2)' % os.path.join(node['site'], 'sitecustomize.py')]
    assert found['problems'][0].startswith('CUDA_HOME: the release\'s Python sees "/usr/local/cuda-12.8"')
    # No value beyond the names asked for comes back (the unit's file holds a token).
    assert 'hf_secret' not in json.dumps(found)


def test_what_cannot_be_read_is_said_never_raised(node, tmp_path):
    assert seen_part(Host(run, None, None), '', json.dumps(SPEC)) == {'environment_seen': None}
    gone = node['unit'].replace(str(node['own']), str(tmp_path / 'gone.env'))
    assert seen(gone)['error'] == 'not read: cannot read the environment file %s' % (tmp_path / 'gone.env')
    assert seen(gone.replace('EnvironmentFile=%s' % (tmp_path / 'gone.env'), 'EnvironmentFile=-%s' % (tmp_path / 'gone.env')))[
        'error'] == ''
    assert '/nonexistent/python' in seen(node['unit'].replace('ExecStart=', 'ExecStart=/nonexistent/python #'))['error']
