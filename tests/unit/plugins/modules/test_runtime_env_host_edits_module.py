# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""runtime_env_host_edits end to end (issue 42): a real venv given its environment by hand (a sitecustomize.py and a
.pth line in its site-packages, a usercustomize.py in a home's user site), read without running any of it."""

from __future__ import annotations

import os
import sys

import pytest

from ansible_collections.inferops.gpu.plugins.modules import runtime_env_host_edits
from module_harness import assert_options_match_spec, include_system_site, invoke, make_venv, patch_exits, record_argument_spec

HAND = 'import os\nos.environ["CUDA_HOME"] = "/usr/local/cuda-12.8"\nos.environ.setdefault("NCCL_DEBUG", "WARN")\n'


@pytest.fixture(autouse=True)
def exits(monkeypatch):
    patch_exits(monkeypatch)


@pytest.fixture
def venv(tmp_path):
    return make_venv(tmp_path / 'venv')


def find(python, **more):
    result = invoke(runtime_env_host_edits, dict({'pythons': [python, '/nonexistent/bin/python'], 'homes': [],
                                                  'managed_names': ['CUDA_HOME', 'NCCL_PROTO']}, **more))
    return bool(result.get('failed')), result


def ours(result, site):
    return [(f['file'], f['line'], f['name'], f['how']) for f in result['findings'] if f.get('file', '').startswith(site)]


def test_a_clean_venv_has_nothing_and_the_collections_hook_is_left_out(venv):
    python, site = venv
    with open(os.path.join(site, 'inferops_runtime_env.py'), 'w') as handle:
        handle.write('import os\nos.environ.setdefault("CUDA_HOME", "/usr/local/cuda-13.0")\nos.environ["PATH"] = "x"\n')
    failed, result = find(python)
    assert not failed and ours(result, site) == []


def test_the_hand_edits_are_found_and_an_assignment_of_the_specs_variable_refuses_the_run(venv, tmp_path):
    python, site = venv
    with open(os.path.join(site, 'sitecustomize.py'), 'w') as handle:
        handle.write(HAND)
    with open(os.path.join(site, 'zz-hand.pth'), 'w') as handle:
        handle.write('/opt/extra\nimport os; os.environ["NCCL_PROTO"] = "LL"\n')
    # site.py reads a user site only where the venv includes the system's site directories.
    include_system_site(python)
    home = tmp_path / 'home'
    user_site = home / '.local' / 'lib' / ('python%d.%d' % sys.version_info[:2]) / 'site-packages'
    user_site.mkdir(parents=True)
    (user_site / 'usercustomize.py').write_text('import os\nos.environ["HF_HUB_OFFLINE"] = "1"\n')
    failed, result = find(python, homes=[str(home)])
    assert failed and result['msg'].startswith('set by hand on this host, against what the collection sets: ')
    assert ours(result, site) == [(os.path.join(site, 'zz-hand.pth'), 2, 'NCCL_PROTO', 'assigns'),
                                  (os.path.join(site, 'sitecustomize.py'), 2, 'CUDA_HOME', 'assigns'),
                                  (os.path.join(site, 'sitecustomize.py'), 3, 'NCCL_DEBUG', 'sets a default for')]
    assert ours(result, str(user_site)) == [(str(user_site / 'usercustomize.py'), 2, 'HF_HUB_OFFLINE', 'assigns')]
    assert [p.split(' while ')[0] for p in result['problems']] == [
        '%s line 2 assigns NCCL_PROTO' % os.path.join(site, 'zz-hand.pth'),
        '%s line 2 assigns CUDA_HOME' % os.path.join(site, 'sitecustomize.py')]
    # Nothing ran: the hand code's values are nowhere in the result.
    assert '12.8' not in str(result) and '"LL"' not in str(result)
    failed, result = find(python, refuse=False)
    assert not failed and len(result['problems']) == 2


def test_the_options_match_the_documentation(venv, monkeypatch):
    seen = record_argument_spec(monkeypatch, runtime_env_host_edits)
    assert not find(venv[0])[0]
    assert_options_match_spec(runtime_env_host_edits, seen)
