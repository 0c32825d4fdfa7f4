# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Replace a file or a symlink in one rename: a reader (the loader, a service, a rollback, the
gate's progress reader) sees the old one or the new one, never half of one or none, and a failure
leaves no temporary file behind. The collection's one writer of this kind: the liveness script
(sglang/liveness.py) keeps its own because it is installed as a standalone script."""

from __future__ import annotations

import os
import shutil
import tempfile


def replace(path, write, mode, uid=None, gid=None):
    """path <- what write(binary file object) writes, with mode (an int) and, given, owner and group."""
    directory, name = os.path.split(path)
    handle, temp = tempfile.mkstemp(prefix='.%s.' % name, dir=directory or '.')
    try:
        with os.fdopen(handle, 'wb') as out:
            write(out)
            out.flush()
            if uid is not None:
                os.fchown(out.fileno(), uid, gid)
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.rename(temp, path)
    except BaseException:
        if os.path.lexists(temp):
            os.remove(temp)
        raise


def replace_bytes(path, data, mode, uid=None, gid=None):
    replace(path, lambda out: out.write(data), mode, uid, gid)


def replace_copy(path, source, mode, uid=None, gid=None):
    """path <- a copy of the file source."""
    def write(out):
        with open(source, 'rb') as data:
            shutil.copyfileobj(data, out, 1 << 20)
    replace(path, write, mode, uid, gid)


def replace_text(path, text, mode, uid=None, gid=None):
    """path <- text (UTF-8)."""
    replace_bytes(path, text.encode('utf-8'), mode, uid, gid)


def replace_symlink(path, target, temp_suffix='.inferops-tmp', uid=None, gid=None):
    """The symlink path -> target, renamed over what path was: the path never goes missing.

    A link cannot be made under a unique temporary name the way mkstemp makes a file, so the
    temporary name is fixed (path + temp_suffix); one an interrupted earlier run left is replaced.
    """
    temp = path + temp_suffix
    if os.path.lexists(temp):
        os.remove(temp)
    os.symlink(target, temp)
    try:
        if uid is not None:
            os.lchown(temp, uid, gid)
        os.rename(temp, path)
    except BaseException:
        if os.path.lexists(temp):
            os.remove(temp)
        raise
