# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files replaced in one rename, with mode and owner, and nothing left behind by a failure."""

from __future__ import annotations

import os

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import (
    replace, replace_bytes, replace_copy, replace_symlink, replace_text,
)


def test_replace_bytes_sets_content_and_mode_in_a_new_inode(tmp_path):
    path = tmp_path / 'conf'
    path.write_text('old\n')
    before = os.stat(str(path)).st_ino
    replace_bytes(str(path), b'new\n', 0o640)
    assert path.read_text() == 'new\n' and oct(os.stat(str(path)).st_mode & 0o777) == '0o640'
    assert os.stat(str(path)).st_ino != before


def test_replace_copy_copies_a_file(tmp_path):
    (tmp_path / 'src').write_bytes(b'x' * 3000000)
    replace_copy(str(tmp_path / 'dest'), str(tmp_path / 'src'), 0o600, os.getuid(), os.getgid())
    assert (tmp_path / 'dest').read_bytes() == b'x' * 3000000


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / 'conf'
    path.write_text('old\n')

    def broken(out):
        out.write(b'half')
        raise OSError('disk full')

    with pytest.raises(OSError, match='disk full'):
        replace(str(path), broken, 0o644)
    assert path.read_text() == 'old\n' and os.listdir(str(tmp_path)) == ['conf']


def test_replace_text_writes_utf8_with_the_mode(tmp_path):
    path = str(tmp_path / 'revision')
    replace_text(path, 'größe\n', 0o640)
    with open(path, 'rb') as handle:
        assert handle.read() == 'größe\n'.encode('utf-8')
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert os.listdir(str(tmp_path)) == ['revision']


def test_replace_symlink_swaps_the_link_and_replaces_a_stale_temporary(tmp_path):
    path = str(tmp_path / 'current')
    os.symlink('release-a', path)
    # An interrupted earlier switch left its temporary link behind.
    os.symlink('release-x', path + '.switch')
    replace_symlink(path, 'release-b', '.switch')
    assert os.readlink(path) == 'release-b'
    assert sorted(os.listdir(str(tmp_path))) == ['current']


def test_replace_symlink_over_a_directory_fails_and_leaves_no_temporary(tmp_path):
    path = tmp_path / 'current'
    path.mkdir()
    with pytest.raises(OSError):
        replace_symlink(str(path), 'release-b')
    assert sorted(os.listdir(str(tmp_path))) == ['current'] and path.is_dir()
