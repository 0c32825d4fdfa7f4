# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Replace a file in one rename: a reader (the loader, a service, a rollback) sees the old file
or the new one, never half of one, and a failure leaves no temporary file behind."""

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
