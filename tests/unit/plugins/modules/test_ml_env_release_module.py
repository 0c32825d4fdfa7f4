# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module around the ml-env release state machine: options, check mode, diff, failures.

The integrity check runs for real: the releases' interpreters are scripts printing what the
test wants, started through the real timeout(1)."""

from __future__ import annotations

import os
import shutil

import pytest
import yaml

from module_harness import assert_documented, assert_options_match_spec, invoke, patch_exits, record_argument_spec
from ansible_collections.inferops.gpu.plugins.modules import ml_env_release

pytestmark = pytest.mark.skipif(not shutil.which('timeout'), reason='needs timeout(1)')
A, B = 'aaaaaaaaaaaa', 'bbbbbbbbbbbb'
SITE = 'lib/python3.12/site-packages'


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    patch_exits(monkeypatch)


class Layout:
    def __init__(self, tmp_path):
        self.root = str(tmp_path / 'ml-env.d')
        self.path = str(tmp_path / 'ml-env')
        self.previous = os.path.join(self.root, 'previous')

    def release(self, name):
        return os.path.join(self.root, 'releases', name)

    def make(self, name, answer='[]', rc=0):
        """A verified release whose interpreter answers the RECORD check with `answer`."""
        release = self.release(name)
        os.makedirs(os.path.join(release, 'bin'))
        python = os.path.join(release, 'bin', 'python')
        with open(python, 'w') as handle:
            handle.write("#!/bin/sh\necho '%s'\nexit %d\n" % (answer, rc))
        os.chmod(python, 0o755)
        with open(os.path.join(release, '.verified'), 'w') as handle:
            handle.write(name + '\n')
        return release

    def args(self, **more):
        args = dict(root=self.root, path=self.path, release=B)
        args.update(more)
        return args


@pytest.fixture
def layout(tmp_path):
    layout = Layout(tmp_path)
    layout.make(A)
    layout.make(B)
    os.symlink(layout.release(B), layout.path)
    os.symlink(layout.release(A), layout.previous)
    return layout


def test_documentation_matches_the_argument_spec(monkeypatch, layout):
    seen = record_argument_spec(monkeypatch, ml_env_release)
    invoke(ml_env_release, layout.args())
    options = assert_options_match_spec(ml_env_release, seen)
    assert set(options['site_files']['suboptions']) == set(seen['argument_spec']['site_files']['options'])


def test_an_unchanged_release_returns_what_is_documented(layout):
    result = invoke(ml_env_release, layout.args())
    assert result['changed'] is False and result['next'] == '' and result['actions'] == []
    assert result['release'] == layout.release(B) and result['previous'] == layout.release(A)
    returns = yaml.safe_load(ml_env_release.RETURN)
    for key, value in result.items():
        if key in returns:
            assert_documented(value, returns[key], key)
    assert set(returns) <= set(result)


def test_rollback_with_diff(layout):
    result = invoke(ml_env_release, dict(layout.args(rollback=True), _ansible_diff=True))
    assert result['changed'] and os.readlink(layout.path) == layout.release(A)
    assert os.readlink(layout.previous) == layout.release(B)
    assert '%s -> %s' % (layout.path, layout.release(B)) in result['diff']['before']
    assert '%s -> %s' % (layout.path, layout.release(A)) in result['diff']['after']


def test_check_mode_predicts_and_changes_nothing(layout):
    result = invoke(ml_env_release, dict(layout.args(release='cccccccccccc'), _ansible_check_mode=True,
                                         _ansible_diff=True))
    assert result['changed'] and result['next'] == ''
    assert result['actions'][0] == 'build and verify release %s' % layout.release('cccccccccccc')
    assert 'point %s at %s' % (layout.path, layout.release('cccccccccccc')) in result['diff']['prepared']
    assert os.readlink(layout.path) == layout.release(B)
    assert not os.path.exists(layout.release('cccccccccccc'))


def test_a_build_is_prepared_then_committed(layout):
    result = invoke(ml_env_release, layout.args(release='cccccccccccc'))
    assert result['next'] == 'build' and result['changed']
    release = layout.release('cccccccccccc')
    os.makedirs(os.path.join(release, SITE))
    staged = invoke(ml_env_release, layout.args(state='staged', release='cccccccccccc', site_packages=SITE,
                                                site_files=[{'path': 'hook.pth', 'content': 'import os\n'}]))
    assert staged['changed'] and os.path.isfile(os.path.join(release, SITE, 'hook.pth'))
    done = invoke(ml_env_release, layout.args(state='verified', release='cccccccccccc', report={'problems': []}))
    assert done['release'] == release and done['previous'] == layout.release(B)
    assert os.readlink(layout.path) == release


def test_damaged_files_ask_for_a_repair(tmp_path):
    layout = Layout(tmp_path)
    layout.make(B, answer='[{"name": "six", "version": "1.17.0", "files": ["six.py"]}]')
    os.symlink(layout.release(B), layout.path)
    result = invoke(ml_env_release, layout.args())
    assert result['next'] == 'repair' and result['damaged'] == [{'name': 'six', 'version': '1.17.0', 'files': ['six.py']}]


def test_the_current_release_with_a_broken_interpreter_fails_naming_it(tmp_path):
    layout = Layout(tmp_path)
    layout.make(B, answer='ImportError: no libpython', rc=1)
    os.symlink(layout.release(B), layout.path)
    result = invoke(ml_env_release, layout.args())
    assert result['failed']
    assert result['msg'] == ('the current release %s its interpreter does not run (rc=1): ImportError: no libpython; '
                             'it was changed by hand: roll back or point %s elsewhere before rebuilding it'
                             % (layout.release(B), layout.path))


def test_a_hung_integrity_check_is_killed(tmp_path):
    layout = Layout(tmp_path)
    release = layout.make(B)
    with open(os.path.join(release, 'bin', 'python'), 'w') as handle:
        handle.write('#!/bin/sh\nexec sleep 300\n')
    os.symlink(release, layout.path)
    result = invoke(ml_env_release, layout.args(command_timeout=1))
    assert result['failed'] and 'within 1 s' in result['msg'] and 'command_timeout' in result['msg']


def test_bad_options_fail_before_anything_is_read(layout):
    result = invoke(ml_env_release, layout.args(release='../x', keep=0))
    assert result['failed']
    assert result['msg'] == 'release "../x" is not a plain file name; keep must be at least 1 (got 0)'


def test_a_real_directory_at_path_is_not_replaced(tmp_path):
    layout = Layout(tmp_path)
    layout.make(B)
    os.makedirs(layout.path)
    result = invoke(ml_env_release, layout.args())
    # Not a link: the role's validation refuses it first; the module must not rename over it.
    assert result['failed'] and 'exists and is not a symlink' in result['msg']
    assert os.path.isdir(layout.path) and not os.path.islink(layout.path)
