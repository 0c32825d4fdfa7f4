# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_server role reads of a host before it decides anything, in one call.

The release the ml-env link points at, the runtime environment file (and its checksum, which the
server's revision covers), the service account and the groups of the GPU device nodes: four
remote tasks (stat, stat, getent, find) and a fifth to learn whether the run only checks, each a
remote Python start on every run. ``read`` takes the host through injected functions, so its
answers are tested on recorded states.
"""

from __future__ import annotations

import fnmatch
import grp
import hashlib
import os
import pwd
import stat as stat_module

DEVICE_PATTERNS = ('nvidia*', 'renderD*')


class Host:
    """The host as this module reads it."""

    def lstat(self, path):
        try:
            return os.lstat(path)
        except FileNotFoundError:
            return None

    def realpath(self, path):
        return os.path.realpath(path)

    def sha1(self, path):
        digest = hashlib.sha1()
        with open(path, 'rb') as handle:
            for block in iter(lambda: handle.read(1 << 20), b''):
                digest.update(block)
        return digest.hexdigest()

    def account(self, name):
        """(uid, gid) of the account, or None."""
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            return None
        return entry.pw_uid, entry.pw_gid

    def group_name(self, gid):
        try:
            return grp.getgrgid(gid).gr_name
        except KeyError:
            return str(gid)

    def walk(self, top, depth):
        """(path, lstat) of every entry under top, at most depth levels down, not following links."""
        found = []

        def visit(directory, level):
            try:
                names = sorted(os.listdir(directory))
            except OSError:
                return
            for name in names:
                path = os.path.join(directory, name)
                seen = self.lstat(path)
                if seen is None:
                    continue
                found.append((path, seen))
                if level < depth and stat_module.S_ISDIR(seen.st_mode):
                    visit(path, level + 1)
        visit(top, 1)
        return found


def release_of(host, link):
    """The release the link points at (its real path), or '' when it is no link."""
    seen = host.lstat(link) if link else None
    if seen is None or not stat_module.S_ISLNK(seen.st_mode):
        return ''
    return host.realpath(link)


def environment_file(host, path):
    """dict(isreg, checksum) of the path itself (a link is no file, as for the stat module before);
    the checksum is SHA-1, as the stat module's was: the server's revision covers it, and another
    digest would restart every server once after an upgrade of the collection."""
    seen = host.lstat(path) if path else None
    if seen is None or not stat_module.S_ISREG(seen.st_mode):
        return dict(isreg=False, checksum='')
    return dict(isreg=True, checksum=host.sha1(path))


def device_groups(host, top='/dev', depth=2):
    """The groups, root's excepted, that own a GPU device node (nvidia*, renderD*), sorted."""
    groups = set()
    for path, seen in host.walk(top, depth):
        if any(fnmatch.fnmatch(os.path.basename(path), pattern) for pattern in DEVICE_PATTERNS):
            groups.add(host.group_name(seen.st_gid))
    groups.discard('root')
    return sorted(groups)


def read(host, params, check_mode):
    account = host.account(params['user'])
    return dict(
        changed=False,
        check_mode=bool(check_mode),
        release=release_of(host, params.get('release_link') or ''),
        environment_file=environment_file(host, params['environment_file']),
        user_exists=account is not None,
        user_uid=account[0] if account is not None else -1,
        device_groups=device_groups(host, params.get('device_dir') or '/dev'),
    )
