# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling_snapshot module: its arguments, check mode and the round trip through Ansible's payload."""

from __future__ import annotations

import os

import yaml

from ansible_collections.inferops.gpu.plugins.modules import rolling_snapshot
from module_harness import invoke, patch_exits


def test_take_then_restore(tmp_path, monkeypatch):
    patch_exits(monkeypatch)
    path = tmp_path / 'unit'
    path.write_text('a\n')
    snap = str(tmp_path / 'snap')
    taken = invoke(rolling_snapshot, {'state': 'taken', 'dir': snap, 'files': [str(path)]})
    assert taken['changed'] and taken['files'][0]['exists']
    path.write_text('b\n')
    back = invoke(rolling_snapshot, {'state': 'restored', 'dir': snap, 'files': taken['files']})
    assert back['changed'] and back['restored'] == [str(path)] and path.read_text() == 'a\n'


def test_check_mode_changes_nothing(tmp_path, monkeypatch):
    patch_exits(monkeypatch)
    path = tmp_path / 'unit'
    path.write_text('a\n')
    done = invoke(rolling_snapshot, {'state': 'taken', 'dir': str(tmp_path / 'snap'), 'files': [str(path)],
                                     '_ansible_check_mode': True})
    assert done['changed'] and not os.path.exists(str(tmp_path / 'snap'))


def test_bad_files_are_refused_with_a_clear_message(tmp_path, monkeypatch):
    patch_exits(monkeypatch)
    done = invoke(rolling_snapshot, {'state': 'taken', 'dir': str(tmp_path), 'files': ['relative/path']})
    assert done['failed'] and "files: every path must be absolute (got 'relative/path')" in done['msg']
    done = invoke(rolling_snapshot, {'state': 'restored', 'dir': str(tmp_path), 'files': ['/etc/x']})
    assert done['failed'] and 'the records a state=taken run returned' in done['msg']
    done = invoke(rolling_snapshot, {'state': 'kept', 'dir': str(tmp_path), 'files': []})
    assert done['failed'] and 'state' in done['msg']


def test_the_documentation_matches_the_argument_spec():
    doc = yaml.safe_load(rolling_snapshot.DOCUMENTATION)
    assert set(doc['options']) == {'state', 'dir', 'files', 'link', 'revision_file'}
    assert yaml.safe_load(rolling_snapshot.RETURN) and yaml.safe_load(rolling_snapshot.EXAMPLES)
