# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A roll's snapshot on a real filesystem: taken, unchanged, put back, check mode."""

from __future__ import annotations

import os

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.fleet.rolling_snapshot import record, restore, take

NOBODY = 65534


def write(path, text, mode=0o644, uid=0, gid=0):
    with open(path, 'w') as handle:
        handle.write(text)
    os.chmod(path, mode)
    os.chown(path, uid, gid)


@pytest.fixture
def node(tmp_path):
    etc = tmp_path / 'etc'
    etc.mkdir()
    write(str(etc / 'unit'), '[Service]\n')
    write(str(etc / 'secret.yaml'), 'api-key: x\n', 0o640, 0, NOBODY)
    (tmp_path / 'releases' / 'a').mkdir(parents=True)
    os.symlink(str(tmp_path / 'releases' / 'a'), str(tmp_path / 'ml-env'))
    write(str(tmp_path / 'revision'), 'rev-1')
    files = [str(etc / 'unit'), str(etc / 'secret.yaml'), str(etc / 'absent.env')]
    return tmp_path, files


def test_a_first_snapshot_keeps_every_file_with_its_mode_and_records_owner_link_and_revision(node):
    root, files = node
    snap = str(root / 'snap')
    done = take(snap, files, str(root / 'ml-env'), str(root / 'revision'))
    assert done['changed'] and done['copied'] == files[:2]
    assert oct(os.stat(snap).st_mode & 0o777) == '0o700'
    assert open(os.path.join(snap, '1')).read() == 'api-key: x\n'
    assert oct(os.stat(os.path.join(snap, '1')).st_mode & 0o777) == '0o640'
    assert os.stat(os.path.join(snap, '1')).st_gid == 0
    assert done['files'][1]['gid'] == NOBODY and done['files'][1]['mode'] == '0640'
    assert done['files'][2] == {'path': files[2], 'exists': False}
    assert done['release'] == str(root / 'releases' / 'a') and done['revision'] == 'rev-1'


def test_a_snapshot_of_an_unchanged_node_changes_nothing(node):
    root, files = node
    take(str(root / 'snap'), files)
    again = take(str(root / 'snap'), files)
    assert not again['changed'] and again['copied'] == []


def test_a_changed_file_or_mode_is_copied_again(node):
    root, files = node
    take(str(root / 'snap'), files)
    os.chmod(files[0], 0o600)
    write(files[1], 'api-key: y\n', 0o640, 0, NOBODY)
    again = take(str(root / 'snap'), files)
    assert again['copied'] == files[:2]


def test_check_mode_writes_nothing_and_says_what_it_would_copy(node):
    root, files = node
    done = take(str(root / 'snap'), files, check_mode=True)
    assert done['changed'] and done['copied'] == files[:2]
    assert not os.path.exists(str(root / 'snap'))


def test_no_link_and_no_revision_file_record_empty_strings(node):
    root, files = node
    done = take(str(root / 'snap'), files, str(root / 'nothing'), str(root / 'no-revision'))
    assert done['release'] == '' and done['revision'] == ''


def test_rollback_puts_content_mode_and_owner_back_and_removes_what_the_roll_created(node):
    root, files = node
    snap = str(root / 'snap')
    kept = take(snap, files)['files']
    write(files[0], '[Service]\nnew\n', 0o600)
    os.chown(files[1], NOBODY, NOBODY)
    write(files[2], 'created by the roll\n')
    done = restore(snap, kept)
    assert done == {'changed': True, 'restored': files[:2], 'removed': [files[2]]}
    assert open(files[0]).read() == '[Service]\n' and oct(os.stat(files[0]).st_mode & 0o777) == '0o644'
    assert (os.stat(files[1]).st_uid, os.stat(files[1]).st_gid) == (0, NOBODY)
    assert not os.path.exists(files[2])
    assert restore(snap, kept) == {'changed': False, 'restored': [], 'removed': []}


def test_restore_in_check_mode_changes_nothing(node):
    root, files = node
    snap = str(root / 'snap')
    kept = take(snap, files)['files']
    write(files[0], 'changed\n')
    write(files[2], 'created\n')
    done = restore(snap, kept, check_mode=True)
    assert done['restored'] == [files[0]] and done['removed'] == [files[2]]
    assert open(files[0]).read() == 'changed\n' and os.path.exists(files[2])


def test_a_restore_without_the_kept_copy_fails_naming_it(node):
    root, files = node
    kept = take(str(root / 'snap'), files)['files']
    os.unlink(str(root / 'snap' / '0'))
    with pytest.raises(ValueError, match='the snapshot has no copy of %s' % files[0]):
        restore(str(root / 'snap'), kept)


def test_only_regular_files_can_be_kept(node):
    root, files = node
    with pytest.raises(ValueError, match='is not a regular file'):
        take(str(root / 'snap'), [str(root / 'etc')])


def test_the_record_names_owner_and_group(node):
    root, files = node
    found = record(files[1])
    assert found['pw_name'] == 'root' and found['gr_name'] in ('nogroup', 'nobody', str(NOBODY))
