# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A roll's snapshot of a node: files kept with their owner, group and mode, the ml-env link's
target and the revision served, taken before the roll and put back by its rollback.

One call instead of a round trip per file: a no-op roll then costs one module run here. A copy
is written only when it differs from the kept one (content or mode), so taking the snapshot of an
unchanged node changes nothing. ``take`` and ``restore`` return what they did (or, in check mode,
would do) and touch the filesystem only through the standard library, so the tests run on tmp_path.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat as stat_module

from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import replace_copy


def _name(lookup, ident):
    try:
        return lookup(ident)[0]
    except KeyError:
        return str(ident)


def record(path):
    """What a file is: exists, its mode as four octal digits, owner and group (names and ids)."""
    try:
        found = os.stat(path)
    except OSError:
        return dict(path=path, exists=False)
    if not stat_module.S_ISREG(found.st_mode):
        raise ValueError('%s is not a regular file: only files can be kept in a snapshot' % path)
    return dict(path=path, exists=True, mode='%04o' % stat_module.S_IMODE(found.st_mode),
                uid=found.st_uid, gid=found.st_gid, pw_name=_name(pwd.getpwuid, found.st_uid),
                gr_name=_name(grp.getgrgid, found.st_gid))


def same_file(a, b, mode=None):
    """True when b exists with a's bytes (and, given mode, that mode)."""
    try:
        if mode is not None and stat_module.S_IMODE(os.stat(b).st_mode) != int(mode, 8):
            return False
        if os.path.getsize(a) != os.path.getsize(b):
            return False
        with open(a, 'rb') as left, open(b, 'rb') as right:
            while True:
                chunk = left.read(1 << 20)
                if chunk != right.read(1 << 20):
                    return False
                if not chunk:
                    return True
    except OSError:
        return False


def _read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ''


def take(directory, files, link='', revision_file='', check_mode=False):
    """Keep every file of files (copy i at directory/i), the link's target and the revision.

    Returns dict(changed, copied (paths written), files (a record per path, in order), release, revision).
    """
    changed = not os.path.isdir(directory)
    if changed and not check_mode:
        os.makedirs(directory, mode=0o700)
    if not check_mode:
        os.chmod(directory, 0o700)
    records, copied = [], []
    for index, path in enumerate(files):
        found = record(path)
        records.append(found)
        kept = os.path.join(directory, str(index))
        if found['exists'] and not same_file(path, kept, found['mode']):
            copied.append(path)
            if not check_mode:
                replace_copy(kept, path, int(found['mode'], 8), 0, 0)
    release = os.readlink(link) if link and os.path.islink(link) else ''
    return dict(changed=changed or bool(copied), copied=copied, files=records, release=release,
                revision=_read_text(revision_file) if revision_file else '')


def _owner(entry):
    """The recorded owner and group as ids on this host (by name first: ids may have moved)."""
    try:
        uid = pwd.getpwnam(entry['pw_name']).pw_uid
    except (KeyError, TypeError):
        uid = entry['uid']
    try:
        gid = grp.getgrnam(entry['gr_name']).gr_gid
    except (KeyError, TypeError):
        gid = entry['gid']
    return uid, gid


def restore(directory, files, check_mode=False):
    """Put the kept files back as take() recorded them (files: its records), remove the ones that
    were absent. Returns dict(changed, restored (paths written or re-owned), removed (paths))."""
    restored, removed = [], []
    for index, entry in enumerate(files):
        path = entry['path']
        if not entry.get('exists'):
            if os.path.lexists(path):
                removed.append(path)
                if not check_mode:
                    os.unlink(path)
            continue
        kept = os.path.join(directory, str(index))
        if not os.path.isfile(kept):
            raise ValueError('the snapshot has no copy of %s (%s): it was taken on another run or removed' % (path, kept))
        uid, gid = _owner(entry)
        now = record(path)
        if same_file(kept, path, entry['mode']) and now.get('uid') == uid and now.get('gid') == gid:
            continue
        restored.append(path)
        if not check_mode:
            replace_copy(path, kept, int(entry['mode'], 8), uid, gid)
    return dict(changed=bool(restored or removed), restored=restored, removed=removed)
