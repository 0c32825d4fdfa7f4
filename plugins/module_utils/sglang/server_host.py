# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_server role reads of a host before it decides anything, in one call.

The release the ml-env link points at, the runtime environment file (and its checksum, which the
server's revision covers), the service account as the role would create it and the groups of the
GPU device nodes, whether the role's paths exist (the unit, logrotate, the liveness timer) and the
state of its units: each of these was a remote task of its own (stat, getent, find, group, user,
systemctl), a remote Python start on every run, and most of them change nothing on a node that
serves. ``read`` takes the host through injected functions, so its answers are tested on recorded
states.
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
        """(uid, gid, home, shell) of the account, or None."""
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            return None
        return entry.pw_uid, entry.pw_gid, entry.pw_dir, entry.pw_shell

    def group_gid(self, name):
        """The gid of the group, or None."""
        try:
            return grp.getgrnam(name).gr_gid
        except KeyError:
            return None

    def member_of(self, user):
        """The names of the groups that list `user` as a member (its supplementary groups)."""
        return sorted(entry.gr_name for entry in grp.getgrall() if user in entry.gr_mem)

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


def account_as_wanted(host, user, group, home, shell, groups):
    """Whether the account exists as the role's group and user tasks would leave it: the group, the
    user in it with that home and shell, and a member of every group in `groups` (which must exist).
    Only then can those two tasks be left out: each would change nothing."""
    account = host.account(user)
    gid = host.group_gid(group) if group else None
    if account is None or gid is None or not home or not shell:
        return False
    uid, primary, user_home, user_shell = account
    if primary != gid or user_home != home or user_shell != shell:
        return False
    return set(groups) <= set(host.member_of(user))


def exists(host, paths):
    """{path: whether something (a link too, even a dangling one) is there}."""
    return dict((path, host.lstat(path) is not None) for path in paths)


def parse_show(text, units):
    """{unit: {'active': ActiveState, 'enabled': UnitFileState}} from `systemctl show -p ActiveState
    -p UnitFileState UNIT...`, whose blocks come in the order of the units, a blank line between."""
    blocks = text.strip().split("\n\n") if text.strip() else []
    states = {}
    for unit, block in zip(units, blocks):
        values = dict(line.split('=', 1) for line in block.splitlines() if '=' in line)
        states[unit] = dict(active=values.get('ActiveState', ''), enabled=values.get('UnitFileState', ''))
    for unit in units:
        states.setdefault(unit, dict(active='', enabled=''))
    return states


def unit_states(run, units):
    """The units' states as systemd has them (one `systemctl show`); empty states when it cannot say."""
    if not units:
        return {}
    rc, out, dummy = run(['systemctl', 'show', '--property=ActiveState,UnitFileState', '--'] + list(units))
    return parse_show(out if rc == 0 else '', units)


def read(host, params, check_mode, run=None):
    account = host.account(params['user'])
    groups = device_groups(host, params.get('device_dir') or '/dev')
    return dict(
        changed=False,
        check_mode=bool(check_mode),
        release=release_of(host, params.get('release_link') or ''),
        environment_file=environment_file(host, params['environment_file']),
        user_exists=account is not None,
        user_uid=account[0] if account is not None else -1,
        device_groups=groups,
        account_as_wanted=account_as_wanted(host, params['user'], params.get('group'), params.get('home'),
                                            params.get('shell'), groups),
        exists=exists(host, params.get('paths') or []),
        units=unit_states(run, params.get('units') or []) if run else {},
    )
