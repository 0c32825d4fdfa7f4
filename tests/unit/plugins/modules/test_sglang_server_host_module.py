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
        if returns[key]['type'] == 'dict' and 'contains' not in returns[key]:
            assert isinstance(result[key], dict), key  # keyed by the paths or units asked
            continue
        assert_documented(result[key], returns[key], key)
    assert not result['changed'] and result['release'] == str(tmp_path / 'releases' / 'abc')
    assert result['environment_file']['isreg'] and result['check_mode'] is False


def test_check_mode_is_reported(tmp_path):
    result = invoke(sglang_server_host, dict(args(tmp_path), _ansible_check_mode=True))
    assert result['check_mode'] is True and not result['changed']


def test_the_paths_and_units_asked_are_reported(monkeypatch, tmp_path):
    seen = []

    def run_command(self, argv, **kwargs):
        seen.append(argv)
        return 0, 'ActiveState=active\nUnitFileState=enabled\n', ''
    from ansible.module_utils.basic import AnsibleModule
    monkeypatch.setattr(AnsibleModule, 'run_command', run_command)
    unit = tmp_path / 'sglang-server.service'
    unit.write_text('')
    result = invoke(sglang_server_host, args(tmp_path, paths=[str(unit), str(tmp_path / 'no.timer')],
                                             units=['sglang-server.service'], command_timeout=7))
    assert result['exists'] == {str(unit): True, str(tmp_path / 'no.timer'): False}
    assert result['units'] == {'sglang-server.service': dict(active='active', enabled='enabled')}
    # Bounded: timeout(1) with the module's command_timeout wraps systemctl.
    assert seen and seen[0][-5:] == ['systemctl', 'show', '--property=ActiveState,UnitFileState', '--', 'sglang-server.service']
    assert '7s' in seen[0][:3]
