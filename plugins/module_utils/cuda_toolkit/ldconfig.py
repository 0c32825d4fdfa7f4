# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A toolkit's ld.so.conf.d file, the same toolkit's files under another order, and the loader cache.

One module call instead of five remote tasks (template, find, remove, stat, command): a run that
changes nothing reads two files, lists one directory and stats the cache. ``plan`` decides from
what ``Files`` saw; ``run`` carries the plan out through the same ``Files`` and a runner for
ldconfig, so the decisions are tested without a root filesystem.
"""

from __future__ import annotations

import fnmatch
import os
import stat as stat_module

from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import replace_bytes

MODE = 0o644
ROOT = 0


class Files:
    """The filesystem as this module uses it. uid/gid: the owner the file is given (root)."""

    def __init__(self, uid=ROOT, gid=ROOT):
        self.uid = uid
        self.gid = gid

    def read(self, path):
        """The file's bytes, or None when there is none."""
        try:
            with open(path, 'rb') as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def stat(self, path):
        """dict(mode, uid, gid, mtime) of path, or None when there is none."""
        try:
            found = os.stat(path)
        except FileNotFoundError:
            return None
        return dict(mode=stat_module.S_IMODE(found.st_mode), uid=found.st_uid, gid=found.st_gid,
                    mtime=found.st_mtime)

    def names(self, directory):
        try:
            return sorted(os.listdir(directory))
        except FileNotFoundError:
            return []

    def write(self, path, data):
        """Replaces path in one rename: the loader never reads a half-written file."""
        replace_bytes(path, data, MODE, self.uid, self.gid)

    def set_attributes(self, path):
        os.chown(path, self.uid, self.gid)
        os.chmod(path, MODE)

    def remove(self, path):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def others(path, names, pattern):
    """The paths in path's directory matching pattern, path itself excepted."""
    if not pattern:
        return []
    directory = os.path.dirname(path)
    return [os.path.join(directory, name) for name in names
            if fnmatch.fnmatchcase(name, pattern) and os.path.join(directory, name) != path]


def plan(current, current_stat, data, owner, removed, cache_stat):
    """What to do: dict(write, set_attributes, remove, ldconfig).

    current: the file's bytes or None. current_stat: Files.stat of the file. data: the bytes it
    must hold. owner: (uid, gid) it must have. removed: the other orders' paths found.
    cache_stat: Files.stat of the loader cache.
    """
    write = current != data
    wrong_attributes = (not write and current_stat is not None
                        and (current_stat['mode'] != MODE or (current_stat['uid'], current_stat['gid']) != owner))
    conf_changed = write or wrong_attributes
    # A cache older than the file means a run stopped between writing it and ldconfig.
    stale = (cache_stat is None
             or (current_stat is not None and not write and cache_stat['mtime'] < current_stat['mtime']))
    return dict(write=write, set_attributes=wrong_attributes, remove=list(removed),
                ldconfig=conf_changed or bool(removed) or stale)


def run(files, run_ldconfig, params, check_mode=False):
    """One module call. params: path, content (text), replaces (a file name pattern or None), cache.

    run_ldconfig: () -> (rc, out, err), bounded by the caller; called only when the cache must be rebuilt.
    """
    path = params['path']
    data = params['content'].encode('utf-8')
    current = files.read(path)
    current_stat = files.stat(path) if current is not None else None
    removed = others(path, files.names(os.path.dirname(path)), params.get('replaces'))
    steps = plan(current, current_stat, data, (files.uid, files.gid), removed, files.stat(params['cache']))
    if not check_mode:
        if steps['write']:
            files.write(path, data)
        elif steps['set_attributes']:
            files.set_attributes(path)
        for other in steps['remove']:
            files.remove(other)
        if steps['ldconfig']:
            rc, out, err = run_ldconfig()
            if rc != 0:
                raise OSError('ldconfig failed (rc=%d): %s' % (rc, (err or out).strip()))
    conf_changed = steps['write'] or steps['set_attributes']
    return dict(changed=conf_changed or bool(steps['remove']) or steps['ldconfig'], path=path,
                conf_changed=conf_changed, removed=steps['remove'], ldconfig_ran=steps['ldconfig'],
                diff=dict(before_header=path, after_header=path,
                          before='' if current is None else current.decode('utf-8', 'replace'),
                          after=params['content']))
