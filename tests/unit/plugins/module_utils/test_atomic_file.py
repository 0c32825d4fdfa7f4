# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files replaced in one rename, with mode and owner, and nothing left behind by a failure."""

from __future__ import annotations

import os

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.atomic_file import replace, replace_bytes, replace_copy


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
