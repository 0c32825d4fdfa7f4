# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""runtime_env_adopt end to end (issue 42): a real venv given its environment by hand, taken over with a backup;
check mode and a second run change nothing, and what the venv's Python then sees is no longer the hand's value."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import host_scan
from ansible_collections.inferops.gpu.plugins.modules import runtime_env_adopt, runtime_env_host_edits
from module_harness import assert_options_match_spec, invoke, make_venv, patch_exits, record_argument_spec

HAND = 'import os\nos.environ["CUDA_HOME"] = "/usr/local/cuda-12.8"\nos.environ.setdefault("NCCL_DEBUG", "WARN")\n'


@pytest.fixture(autouse=True)
def exits(monkeypatch, tmp_path):
    patch_exits(monkeypatch)
    # The host's own /etc is never read or written here.
    (tmp_path / 'etc' / 'profile.d').mkdir(parents=True)
    (tmp_path / 'etc' / 'environment').write_text('CUDA_HOME=/usr/local/cuda-12.8\n')
    monkeypatch.setattr(host_scan, 'ETC', str(tmp_path / 'etc'))


@pytest.fixture
def venv(tmp_path):
    python, site = make_venv(tmp_path / 'venv')
    with open(os.path.join(site, 'sitecustomize.py'), 'w') as handle:
        handle.write(HAND)
    return python, site


def adopt(tmp_path, python, **more):
    args = dict({'pythons': [python], 'homes': [], 'managed_names': ['CUDA_HOME', 'NCCL_PROTO'],
                 'backup_dir': str(tmp_path / 'backups')}, **more)
    return invoke(runtime_env_adopt, args)


def seen(python):
    return subprocess.run([python, '-c', 'import os; print(os.environ.get("CUDA_HOME"))'], capture_output=True,
                          text=True, check=True, timeout=120, env={'CUDA_HOME': '/usr/local/cuda-13.0'}).stdout.strip()


def test_check_mode_says_what_it_would_do_and_changes_nothing(venv, tmp_path):
    python, site = venv
    result = adopt(tmp_path, python, _ansible_check_mode=True, _ansible_diff=True)
    assert result['changed'] and result['backup'] == ''
    assert [(e['path'], [c['line'] for c in e['changes']]) for e in result['edited']] == [
        (os.path.join(site, 'sitecustomize.py'), [2]), (str(tmp_path / 'etc' / 'environment'), [1])]
    assert result['diff'][0]['before'] == HAND and 'inferops.gpu adopted' in result['diff'][0]['after']
    assert open(os.path.join(site, 'sitecustomize.py')).read() == HAND
    assert not (tmp_path / 'backups').exists()


def test_the_hand_edit_is_taken_over_with_a_backup_and_a_second_run_changes_nothing(venv, tmp_path):
    python, site = venv
    assert seen(python) == '/usr/local/cuda-12.8'
    result = adopt(tmp_path, python)
    assert result['changed'] and not result.get('failed')
    backup = result['backup']
    assert os.path.dirname(backup) == str(tmp_path / 'backups')
    record = json.load(open(os.path.join(backup, 'adoption.json')))
    assert [item['path'] for item in record['edited']] == [
        os.path.join(site, 'sitecustomize.py'), str(tmp_path / 'etc' / 'environment')]
    assert open(os.path.join(backup, site.lstrip('/'), 'sitecustomize.py')).read() == HAND
    # The spec's value now reaches the interpreter; the default beyond the spec stays.
    assert seen(python) == '/usr/local/cuda-13.0'
    assert 'os.environ.setdefault("NCCL_DEBUG", "WARN")' in open(os.path.join(site, 'sitecustomize.py')).read()
    again = adopt(tmp_path, python)
    assert not again['changed'] and again['edited'] == [] and again['backup'] == ''
    found = invoke(runtime_env_host_edits, {'pythons': [python], 'homes': [], 'managed_names': ['CUDA_HOME']})
    assert not found.get('failed') and found['problems'] == []
    # undo.sh puts the hand's file back.
    subprocess.run(['sh', os.path.join(backup, 'undo.sh')], check=True, timeout=60)
    assert open(os.path.join(site, 'sitecustomize.py')).read() == HAND


def test_a_write_it_cannot_cut_out_refuses_and_changes_nothing(venv, tmp_path):
    python, site = venv
    with open(os.path.join(site, 'usercustomize.py'), 'w') as handle:
        handle.write('import os; os.environ["NCCL_PROTO"] = "LL"\n')
    with open(os.path.join(site, 'zz.pth'), 'w') as handle:
        handle.write('import usercustomize\n')
    result = adopt(tmp_path, python)
    assert result['failed'] and result['msg'].startswith('cannot take over this host by itself (nothing was changed): ')
    assert 'usercustomize.py line 1 assigns NCCL_PROTO' in result['msg']
    assert open(os.path.join(site, 'sitecustomize.py')).read() == HAND and not (tmp_path / 'backups').exists()


def test_the_options_match_the_documentation(venv, tmp_path, monkeypatch):
    seen_spec = record_argument_spec(monkeypatch, runtime_env_adopt)
    assert not adopt(tmp_path, venv[0], _ansible_check_mode=True).get('failed')
    assert_options_match_spec(runtime_env_adopt, seen_spec)
