# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""cuda_toolkit_link as Ansible calls it: documentation against the spec, results, failures."""

from __future__ import annotations

import os
import shutil

import pytest
import yaml

from module_harness import assert_documented, assert_options_match_spec, invoke, patch_exits, record_argument_spec
from ansible_collections.inferops.gpu.plugins.modules import cuda_toolkit_link

pytestmark = pytest.mark.skipif(not shutil.which('timeout'), reason='needs timeout(1)')


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    patch_exits(monkeypatch)


def test_documentation_matches_the_argument_spec(monkeypatch, tmp_path):
    seen = record_argument_spec(monkeypatch, cuda_toolkit_link)
    (tmp_path / 'cuda-13.0').mkdir()
    result = invoke(cuda_toolkit_link, dict(path=str(tmp_path / 'cuda'), src=str(tmp_path / 'cuda-13.0')))
    assert_options_match_spec(cuda_toolkit_link, seen)
    returns = yaml.safe_load(cuda_toolkit_link.RETURN)
    for key in returns:
        assert_documented(result[key], returns[key], key)
    assert result['changed'] and os.readlink(str(tmp_path / 'cuda')) == str(tmp_path / 'cuda-13.0')


def test_check_mode_with_diff(tmp_path):
    result = invoke(cuda_toolkit_link, dict(path=str(tmp_path / 'cuda'), src='/usr/local/cuda-13.0',
                                            _ansible_check_mode=True, _ansible_diff=True))
    assert result['changed'] and not os.path.lexists(str(tmp_path / 'cuda'))
    assert result['diff']['before']['state'] == 'absent' and result['diff']['after']['state'] == 'link'


def test_a_directory_is_refused(tmp_path):
    (tmp_path / 'cuda').mkdir()
    result = invoke(cuda_toolkit_link, dict(path=str(tmp_path / 'cuda'), src='/usr/local/cuda-13.0'))
    assert result['failed'] and 'is a directory, not a symlink' in result['msg']


def test_restored_needs_home(tmp_path):
    result = invoke(cuda_toolkit_link, dict(path=str(tmp_path / 'cuda'), state='restored'))
    assert result['failed'] and 'home' in result['msg']
