# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's directories and files, with owner, group and mode, in one module call.

A role that writes a dozen paths as a dozen `file` and `template` tasks pays a remote Python
start (and for a template, two) for each, on every run, changed or not: most of a no-op run's
time. The controller renders the templates (the role's own lookups), this writes them all in one
call. ``plan`` decides from what ``Filesystem`` saw; ``run`` carries the plan out through the
same ``Filesystem``, so the decisions are tested on recorded states without a root filesystem.
Files are replaced in one rename (``atomic_file``): a reader sees the old file or the new one.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import stat as stat_module

from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import replace_bytes

STATES = ('directory', 'file', 'touch', 'absent')


class ManagedFilesError(Exception):
    """A path this module cannot bring to its state; the message names the path."""


class Filesystem:
    """The filesystem as this module uses it."""

    def lstat(self, path):
        """dict(kind, mode, uid, gid) of path itself (kind: directory, file, link, other), or None."""
        try:
            found = os.lstat(path)
        except FileNotFoundError:
            return None
        kind = ('link' if stat_module.S_ISLNK(found.st_mode) else 'directory' if stat_module.S_ISDIR(found.st_mode)
                else 'file' if stat_module.S_ISREG(found.st_mode) else 'other')
        return dict(kind=kind, mode=stat_module.S_IMODE(found.st_mode), uid=found.st_uid, gid=found.st_gid)

    def stat(self, path):
        """The same through symbolic links (a directory may be a link to one), or None."""
        try:
            found = os.stat(path)
        except FileNotFoundError:
            return None
        kind = 'directory' if stat_module.S_ISDIR(found.st_mode) else 'file' if stat_module.S_ISREG(found.st_mode) else 'other'
        return dict(kind=kind, mode=stat_module.S_IMODE(found.st_mode), uid=found.st_uid, gid=found.st_gid)

    def read(self, path):
        with open(path, 'rb') as handle:
            return handle.read()

    def uid(self, name):
        return pwd.getpwnam(name).pw_uid

    def gid(self, name):
        return grp.getgrnam(name).gr_gid

    def mkdir(self, path, mode, uid, gid):
        # Missing parents get the same owner and mode, as the file module gives them.
        parent = os.path.dirname(path.rstrip('/'))
        if parent and not os.path.exists(parent):
            self.mkdir(parent, mode, uid, gid)
        os.mkdir(path, mode)
        self.set_attributes(path, mode, uid, gid)

    def touch(self, path, mode, uid, gid):
        # O_EXCL: never through a link planted since the plan looked.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode))
        self.set_attributes(path, mode, uid, gid)

    def write(self, path, data, mode, uid, gid):
        replace_bytes(path, data, mode, uid, gid)

    def set_attributes(self, path, mode, uid, gid):
        os.chown(path, uid, gid)
        os.chmod(path, mode)

    def remove(self, path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


def parse_mode(value, path):
    """An octal mode as the roles write it ('0644', '644'): an int, or an error naming the path."""
    text = str(value)
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o7777:
        raise ManagedFilesError('%s: mode %r is not an octal mode (for example 0644)' % (path, text))
    return mode


def owner_ids(fs, entry, check_mode):
    """(uid, gid) for the entry, None for one that does not exist yet: in check mode the user a task
    before would create is not there, and the path then counts as changed."""
    ids = []
    for kind, lookup in (('owner', fs.uid), ('group', fs.gid)):
        name = entry.get(kind) or 'root'
        try:
            ids.append(lookup(name))
        except KeyError:
            if not check_mode:
                raise ManagedFilesError('%s: %s %r does not exist on this host' % (entry['path'], kind, name))
            ids.append(None)
    return ids[0], ids[1]


def content_of(entry):
    """The bytes an entry of state file holds: its content or its secret content."""
    text = entry.get('secret_content')
    if text is None:
        text = entry.get('content')
    if text is None:
        raise ManagedFilesError('%s: state file needs content or secret_content' % entry['path'])
    return text.encode('utf-8')


def plan(entry, seen, current, uid, gid):
    """What to do for one entry: one of None, 'create', 'write', 'attributes', 'remove'.

    seen: Filesystem.lstat of the path (stat for a directory or a touched file, which may be links to
    one); current: the bytes the file holds now (state file); uid/gid: None when not known yet.
    """
    state = entry.get('state') or 'file'
    path = entry['path']
    if state == 'absent':
        return 'remove' if seen is not None else None
    if seen is None:
        return 'write' if state == 'file' else 'create'
    if state == 'directory' and seen['kind'] != 'directory':
        raise ManagedFilesError('%s exists and is not a directory (%s)' % (path, seen['kind']))
    if state == 'touch' and seen['kind'] not in ('file', 'other'):
        raise ManagedFilesError('%s exists and is not a file (%s)' % (path, seen['kind']))
    if state == 'file':
        if seen['kind'] == 'directory':
            raise ManagedFilesError('%s is a directory, not a file' % path)
        # A link or another kind of file is replaced by the file, as the template module does.
        if seen['kind'] != 'file' or current != content_of(entry):
            return 'write'
    mode = parse_mode(entry['mode'], path)
    if uid is None or gid is None or (seen['mode'], seen['uid'], seen['gid']) != (mode, uid, gid):
        return 'attributes'
    return None


def diff_of(entry, action, current):
    """The diff of a plain file's content (never of secret content: not even its length)."""
    if entry.get('secret_content') is not None or (entry.get('state') or 'file') != 'file':
        return None
    if action != 'write':
        return None
    return dict(before_header=entry['path'], after_header=entry['path'],
                before=(current or b'').decode('utf-8', 'replace'), after=entry['content'])


def run(fs, entries, check_mode=False, want_diff=False):
    """Bring every entry, in order, to its state. Returns changed, changed_paths and the diffs."""
    changed_paths, diffs = [], []
    for entry in entries:
        state = entry.get('state') or 'file'
        if state not in STATES:
            raise ManagedFilesError('%s: state %r is not one of %s' % (entry['path'], state, ', '.join(STATES)))
        path = entry['path']
        mode = parse_mode(entry.get('mode') or '0644', path) if state != 'absent' else None
        seen = fs.lstat(path)
        if seen is not None and seen['kind'] == 'link' and state in ('directory', 'touch'):
            seen = fs.stat(path) or seen
        current = fs.read(path) if state == 'file' and seen is not None and seen['kind'] == 'file' else None
        uid, gid = owner_ids(fs, entry, check_mode) if state != 'absent' else (None, None)
        action = plan(dict(entry, mode=entry.get('mode') or '0644'), seen, current, uid, gid)
        if action is None:
            continue
        changed_paths.append(path)
        if want_diff:
            diff = diff_of(entry, action, current)
            if diff is not None:
                diffs.append(diff)
        if check_mode:
            continue
        if action == 'remove':
            fs.remove(path)
        elif action == 'write':
            fs.write(path, content_of(entry), mode, uid, gid)
        elif action == 'create' and state == 'directory':
            fs.mkdir(path, mode, uid, gid)
        elif action == 'create':
            fs.touch(path, mode, uid, gid)
        else:
            fs.set_attributes(path, mode, uid, gid)
    return dict(changed=bool(changed_paths), changed_paths=changed_paths, diff=diffs)
