# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""managed_files: the decisions (plan) on recorded states, and runs on a real directory."""

from __future__ import annotations

import grp
import os
import pwd

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils._common import managed_files as mf

ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name
UID, GID = os.getuid(), os.getgid()


def seen(kind='file', mode=0o644, uid=UID, gid=GID):
    return dict(kind=kind, mode=mode, uid=uid, gid=gid)


# plan

@pytest.mark.parametrize('state, expected', [('file', 'write'), ('directory', 'create'), ('touch', 'create'), ('absent', None)])
def test_a_missing_path_is_created_or_left_absent(state, expected):
    assert mf.plan(dict(path='/p', state=state, mode='0644', content='x'), None, None, UID, GID) == expected


def test_a_file_with_its_content_owner_and_mode_is_left_alone():
    entry = dict(path='/p', state='file', mode='0644', content='x\n')
    assert mf.plan(entry, seen(), b'x\n', UID, GID) is None


def test_new_content_is_written_and_a_new_mode_or_owner_only_set():
    entry = dict(path='/p', state='file', mode='0600', content='x\n')
    assert mf.plan(entry, seen(mode=0o600), b'old\n', UID, GID) == 'write'
    assert mf.plan(entry, seen(mode=0o644), b'x\n', UID, GID) == 'attributes'
    assert mf.plan(entry, seen(mode=0o600, uid=UID + 1), b'x\n', UID, GID) == 'attributes'


def test_secret_content_counts_as_the_content():
    entry = dict(path='/p', state='file', mode='0600', secret_content='key: s3cret\n')
    assert mf.plan(entry, seen(mode=0o600), b'key: s3cret\n', UID, GID) is None
    assert mf.plan(entry, seen(mode=0o600), b'key: old\n', UID, GID) == 'write'


def test_a_link_where_a_file_belongs_is_replaced_by_the_file():
    entry = dict(path='/p', state='file', mode='0644', content='x\n')
    assert mf.plan(entry, seen(kind='link'), None, UID, GID) == 'write'


def test_an_owner_not_there_yet_in_check_mode_counts_as_a_change():
    entry = dict(path='/d', state='directory', mode='0750')
    assert mf.plan(entry, seen(kind='directory', mode=0o750), None, None, GID) == 'attributes'


def test_a_present_path_is_removed_for_absent():
    assert mf.plan(dict(path='/p', state='absent'), seen(), None, None, None) == 'remove'


@pytest.mark.parametrize('entry, found, message', [
    (dict(path='/d', state='directory', mode='0755'), seen(kind='file'), '/d exists and is not a directory (file)'),
    (dict(path='/f', state='file', mode='0644', content=''), seen(kind='directory'), '/f is a directory, not a file'),
    (dict(path='/t', state='touch', mode='0644'), seen(kind='directory'), '/t exists and is not a file (directory)'),
    (dict(path='/f', state='file', mode='0644'), None, '/f: state file needs content or secret_content'),
    (dict(path='/f', state='directory', mode='8755'), seen(kind='directory'), "/f: mode '8755' is not an octal mode"),
])
def test_what_cannot_be_done_is_named_with_its_path(entry, found, message):
    with pytest.raises(mf.ManagedFilesError, match=message.replace('(', r'\(').replace(')', r'\)')):
        if entry.get('content') is None and entry['state'] == 'file':
            mf.content_of(entry)
        mf.plan(entry, found, b'', UID, GID)


def test_the_diff_shows_plain_content_and_never_a_secret():
    plain = dict(path='/u', state='file', content='new\n')
    assert mf.diff_of(plain, 'write', b'old\n') == dict(before_header='/u', after_header='/u', before='old\n', after='new\n')
    assert mf.diff_of(plain, 'attributes', b'new\n') is None
    assert mf.diff_of(dict(path='/c', state='file', secret_content='s3cret\n'), 'write', b'old\n') is None


# run, on a real directory

def entries(root):
    return [
        dict(path=str(root / 'etc'), state='directory', owner=ME, group=MY_GROUP, mode='0755'),
        dict(path=str(root / 'lib' / 'deep' / 'cache'), state='directory', owner=ME, group=MY_GROUP, mode='0750'),
        dict(path=str(root / 'etc' / 'server.log'), state='touch', owner=ME, group=MY_GROUP, mode='0640'),
        dict(path=str(root / 'etc' / 'config.yaml'), owner=ME, group=MY_GROUP, mode='0600', secret_content='api-key: s3cret\n'),
        dict(path=str(root / 'etc' / 'unit.service'), owner=ME, group=MY_GROUP, mode='0644', content='[Service]\n'),
    ]


def mode_of(path):
    return oct(os.stat(str(path)).st_mode & 0o7777)


def test_a_first_run_creates_everything_in_order_and_a_second_changes_nothing(tmp_path):
    result = mf.run(mf.Filesystem(), entries(tmp_path), want_diff=True)
    assert result['changed_paths'] == [entry['path'] for entry in entries(tmp_path)]
    assert [d['after_header'] for d in result['diff']] == [str(tmp_path / 'etc' / 'unit.service')]
    assert (tmp_path / 'etc' / 'config.yaml').read_text() == 'api-key: s3cret\n'
    assert mode_of(tmp_path / 'etc' / 'config.yaml') == '0o600'
    assert mode_of(tmp_path / 'etc' / 'server.log') == '0o640'
    # Missing parents get the directory's own mode.
    assert mode_of(tmp_path / 'lib') == mode_of(tmp_path / 'lib' / 'deep') == '0o750'
    assert mf.run(mf.Filesystem(), entries(tmp_path)) == dict(changed=False, changed_paths=[], diff=[])


def test_touch_keeps_the_content_and_times_of_the_log(tmp_path):
    mf.run(mf.Filesystem(), entries(tmp_path))
    log = tmp_path / 'etc' / 'server.log'
    log.write_text('served\n')
    os.utime(str(log), (1000, 1000))
    os.chmod(str(log), 0o644)
    result = mf.run(mf.Filesystem(), entries(tmp_path))
    assert result['changed_paths'] == [str(log)]
    assert log.read_text() == 'served\n' and os.stat(str(log)).st_mtime == 1000 and mode_of(log) == '0o640'


def test_check_mode_reports_and_changes_nothing(tmp_path):
    mf.run(mf.Filesystem(), entries(tmp_path))
    changed = entries(tmp_path)
    changed[4]['content'] = '[Service]\nUser=sglang\n'
    changed.append(dict(path=str(tmp_path / 'etc' / 'server.log'), state='absent'))
    result = mf.run(mf.Filesystem(), changed, check_mode=True, want_diff=True)
    assert result['changed_paths'] == [str(tmp_path / 'etc' / 'unit.service'), str(tmp_path / 'etc' / 'server.log')]
    assert result['diff'][0]['before'] == '[Service]\n'
    assert (tmp_path / 'etc' / 'unit.service').read_text() == '[Service]\n' and (tmp_path / 'etc' / 'server.log').exists()


def test_absent_removes_files_and_directories(tmp_path):
    mf.run(mf.Filesystem(), entries(tmp_path))
    result = mf.run(mf.Filesystem(), [dict(path=str(tmp_path / 'etc' / 'unit.service'), state='absent'),
                                      dict(path=str(tmp_path / 'lib'), state='absent')])
    assert result['changed'] and not (tmp_path / 'etc' / 'unit.service').exists() and not (tmp_path / 'lib').exists()


def test_a_written_file_replaces_a_link_rather_than_writing_through_it(tmp_path):
    target = tmp_path / 'elsewhere'
    target.write_text('keep\n')
    link = tmp_path / 'unit.service'
    link.symlink_to(target)
    mf.run(mf.Filesystem(), [dict(path=str(link), owner=ME, group=MY_GROUP, content='[Service]\n')])
    assert not link.is_symlink() and link.read_text() == '[Service]\n' and target.read_text() == 'keep\n'


def test_an_unknown_owner_fails_naming_it_and_counts_as_changed_in_check_mode(tmp_path):
    entry = dict(path=str(tmp_path / 'd'), state='directory', owner='no-such-user-inferops', group=MY_GROUP, mode='0755')
    with pytest.raises(mf.ManagedFilesError, match="owner 'no-such-user-inferops' does not exist on this host"):
        mf.run(mf.Filesystem(), [entry])
    assert mf.run(mf.Filesystem(), [entry], check_mode=True)['changed_paths'] == [entry['path']]
    assert not (tmp_path / 'd').exists()
