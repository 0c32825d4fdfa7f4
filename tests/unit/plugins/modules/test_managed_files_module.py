# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""managed_files as Ansible calls it: documentation against the spec, the secret masked, failures."""

from __future__ import annotations

import grp
import json
import os
import pwd

import pytest
import yaml

from module_harness import assert_documented, assert_options_match_spec, invoke, patch_exits, record_argument_spec
from ansible_collections.inferops.gpu.plugins.modules import managed_files

ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name
SECRET = 'api-key: s3cret-molecule\n'


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    patch_exits(monkeypatch)


def files(tmp_path):
    return [dict(path=str(tmp_path / 'etc'), state='directory', owner=ME, group=MY_GROUP, mode='0755'),
            dict(path=str(tmp_path / 'etc' / 'config.yaml'), owner=ME, group=MY_GROUP, mode='0600', secret_content=SECRET),
            dict(path=str(tmp_path / 'etc' / 'unit.service'), owner=ME, group=MY_GROUP, content='[Service]\n')]


def test_documentation_matches_the_argument_spec(monkeypatch, tmp_path):
    seen = record_argument_spec(monkeypatch, managed_files)
    result = invoke(managed_files, dict(files=files(tmp_path), _ansible_diff=True))
    options = assert_options_match_spec(managed_files, seen)
    suboptions = options['files']['suboptions']
    spec = seen['argument_spec']['files']['options']
    assert set(suboptions) == set(spec)
    for name, doc in suboptions.items():
        assert (doc['type'], doc.get('default'), doc.get('choices')) == (spec[name]['type'], spec[name].get('default'),
                                                                         spec[name].get('choices')), name
    returns = yaml.safe_load(managed_files.RETURN)
    for key in returns:
        assert_documented(result[key], returns[key], key)
    assert result['changed'] and len(result['changed_paths']) == 3


def test_the_secret_is_in_no_part_of_the_result(tmp_path):
    result = invoke(managed_files, dict(files=files(tmp_path), _ansible_diff=True))
    assert 's3cret' not in json.dumps(result)
    assert [d['after'] for d in result['diff']] == ['[Service]\n']
    assert (tmp_path / 'etc' / 'config.yaml').read_text() == SECRET


def test_a_second_run_changes_nothing_and_has_no_diff(tmp_path):
    invoke(managed_files, dict(files=files(tmp_path)))
    result = invoke(managed_files, dict(files=files(tmp_path), _ansible_diff=True))
    assert not result['changed'] and result['changed_paths'] == [] and 'diff' not in result


def test_check_mode_writes_nothing(tmp_path):
    result = invoke(managed_files, dict(files=files(tmp_path), _ansible_check_mode=True))
    assert result['changed'] and not (tmp_path / 'etc').exists()


def test_a_path_that_cannot_be_brought_to_its_state_fails_naming_it(tmp_path):
    (tmp_path / 'etc').write_text('not a directory\n')
    result = invoke(managed_files, dict(files=files(tmp_path)))
    assert result['failed'] and result['msg'] == '%s exists and is not a directory (file)' % (tmp_path / 'etc')
