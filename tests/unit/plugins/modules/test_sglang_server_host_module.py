# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_server_host as Ansible calls it: documentation against the spec and the result, check mode."""

from __future__ import annotations

import os
import pwd

import pytest
import yaml

from module_harness import assert_documented, assert_options_match_spec, invoke, patch_exits, record_argument_spec
from ansible_collections.inferops.gpu.plugins.modules import sglang_server_host

ME = pwd.getpwuid(os.getuid()).pw_name


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    patch_exits(monkeypatch)


def args(tmp_path, **extra):
    env = tmp_path / 'runtime-env.env'
    env.write_text('X=1\n')
    release = tmp_path / 'releases' / 'abc'
    release.mkdir(parents=True)
    (tmp_path / 'ml-env').symlink_to(release)
    return dict(dict(release_link=str(tmp_path / 'ml-env'), environment_file=str(env), user=ME, device_dir=str(tmp_path)),
                **extra)


def test_documentation_matches_the_argument_spec_and_the_result(monkeypatch, tmp_path):
    seen = record_argument_spec(monkeypatch, sglang_server_host)
    result = invoke(sglang_server_host, args(tmp_path))
    assert_options_match_spec(sglang_server_host, seen)
    returns = yaml.safe_load(sglang_server_host.RETURN)
    for key in returns:
        assert_documented(result[key], returns[key], key)
    assert not result['changed'] and result['release'] == str(tmp_path / 'releases' / 'abc')
    assert result['environment_file']['isreg'] and result['check_mode'] is False


def test_check_mode_is_reported(tmp_path):
    result = invoke(sglang_server_host, dict(args(tmp_path), _ansible_check_mode=True))
    assert result['check_mode'] is True and not result['changed']
