# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ml-env release state machine: which release is current, trusted, to build, repair or prune.

Layout (ml_env role)::

    <path>                      -> <root>/releases/<name>   the current release
    <root>/previous             -> <root>/releases/<name>   what rollback switches to
    <root>/releases/<name>/.verified                        <name>, written after verification passed

A release is trusted only when ``.verified`` holds its name and its interpreter is there; an
interpreter that does not run, or files that differ from their RECORD, are found by running
``FILES_CHECK`` with the release's own python. Every decision is a function of what ``Host`` reads;
``Host`` is the only place that touches the filesystem or runs a command, so the tests drive the
machine on a temporary directory with a stand-in for the interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import stat as stat_module

from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import replace_symlink, replace_text

MARKER = '.verified'
RECORDS = '.ml_env'
REPORT = 'verify.json'
SWITCH_SUFFIX = '.ml-env-switch'
NO_MARKER = 'has no valid verification marker (%s)' % MARKER

# Run by a release's own interpreter: the installed distributions of the release (not the host's)
# whose files differ from their RECORD. A file larger or smaller than recorded is damaged; one
# changed since the release was verified (newer than .verified, argv[1]) is hashed: hashing every
# file of a torch stack on each run would take minutes. Prints JSON.
FILES_CHECK = r'''
import base64, csv, hashlib, json, os, sys
from importlib import metadata
prefix = os.path.realpath(sys.prefix) + os.sep
since = os.stat(sys.argv[1]).st_mtime
damaged = []
for dist in metadata.distributions():
    if not os.path.realpath(str(dist.locate_file(""))).startswith(prefix):
        continue
    bad = []
    # RECORD itself, not dist.files: since Python 3.12 files() leaves out the files that are missing.
    for row in csv.reader((dist.read_text("RECORD") or "").splitlines()):
        if len(row) < 2 or not row[1].startswith("sha256="):
            continue
        path = str(dist.locate_file(row[0]))
        try:
            found = os.stat(path)
        except OSError:
            bad.append(row[0])
            continue
        if len(row) > 2 and row[2].isdigit() and found.st_size != int(row[2]):
            bad.append(row[0])
        elif found.st_mtime >= since:
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            if base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode() != row[1][len("sha256="):]:
                bad.append(row[0])
    if bad:
        damaged.append({"name": dist.metadata["Name"], "version": dist.version, "files": sorted(bad)})
print(json.dumps(sorted(damaged, key=lambda entry: entry["name"])))
'''
FILES_CHECK_ENV = {'PYTHONNOUSERSITE': '1'}


class ReleaseError(Exception):
    """A state the role must not act on; the message says what and how to get out of it."""


class Layout:
    """The paths of one ml-env installation (ml_env_root, ml_env_path)."""

    def __init__(self, root, path):
        self.root = os.path.normpath(root)
        self.path = os.path.normpath(path)
        self.releases = os.path.join(self.root, 'releases')
        self.previous_link = os.path.join(self.root, 'previous')

    def release(self, name):
        return os.path.join(self.releases, name)


class Host:
    """Filesystem and the one command the state machine needs.

    run_command: (argv, environ_update=...) -> (rc, stdout, stderr), bounded by the caller.
    owner: (uid, gid) for what is created, None to leave it to the process (tests as non-root).
    """

    def __init__(self, run_command, owner=None):
        self.run_command = run_command
        self.owner = owner

    # Reading.
    def readlink(self, path):
        """The target of the symlink at path, '' when path is no symlink (or absent)."""
        try:
            return os.readlink(path)
        except OSError:
            return ''

    def lexists(self, path):
        return os.path.lexists(path)

    def is_release_dir(self, path):
        try:
            return stat_module.S_ISDIR(os.lstat(path).st_mode)
        except OSError:
            return False

    def isdir(self, path):
        return os.path.isdir(path)

    def read_text(self, path):
        try:
            with open(path, encoding='utf-8') as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError):
            return None

    def marker_mtime(self, release):
        """mtime of the release's marker when it is a regular file, else None."""
        try:
            found = os.stat(os.path.join(release, MARKER))
        except OSError:
            return None
        return found.st_mtime if stat_module.S_ISREG(found.st_mode) else None

    def listdir(self, path):
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []

    def integrity(self, release):
        """(damaged distributions, why the interpreter did not run or '')."""
        rc, out, err = self.run_command([os.path.join(release, 'bin', 'python'), '-I', '-B', '-c', FILES_CHECK,
                                         os.path.join(release, MARKER)], environ_update=FILES_CHECK_ENV)
        if rc == 0:
            try:
                damaged = json.loads(out)
            except ValueError:
                damaged = None
            if isinstance(damaged, list):
                return damaged, ''
        last = (err or '').strip().splitlines()[-1:] or (out or '').strip().splitlines()[-1:]
        return [], 'its interpreter does not run (rc=%d): %s' % (rc, ''.join(last))

    # Writing.
    def own(self, path):
        if self.owner is not None:
            os.lchown(path, self.owner[0], self.owner[1])

    def makedirs(self, path, mode=0o755):
        missing = []
        while path and not os.path.isdir(path):
            missing.append(path)
            path = os.path.dirname(path)
        for item in reversed(missing):
            os.mkdir(item, mode)
            os.chmod(item, mode)
            self.own(item)

    def file_differs(self, path, content, mode):
        try:
            found = os.lstat(path)
        except OSError:
            return True
        if not stat_module.S_ISREG(found.st_mode) or stat_module.S_IMODE(found.st_mode) != mode:
            return True
        if self.owner is not None and (found.st_uid, found.st_gid) != tuple(self.owner):
            return True
        return self.read_text(path) != content

    def write_file(self, path, content, mode=0o644):
        """Replace path with content in one rename(2): a reader sees the old file or the new one."""
        uid, gid = self.owner if self.owner is not None else (None, None)
        replace_text(path, content, mode, uid, gid)

    def link(self, target, path):
        """Point the symlink path at target in one rename(2); never a moment without the link."""
        uid, gid = self.owner if self.owner is not None else (None, None)
        replace_symlink(path, target, SWITCH_SUFFIX, uid, gid)

    def remove_link(self, path):
        if os.path.islink(path):
            os.remove(path)

    def remove_tree(self, path):
        if os.path.islink(path) or os.path.isfile(path):
            os.remove(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)


def is_trusted(host, release):
    """The marker holds the release's name and its interpreter is there (even a dangling link:
    the integrity check then names why it does not run)."""
    marker = host.read_text(os.path.join(release, MARKER))
    return (marker is not None and marker.strip() == os.path.basename(release)
            and host.lexists(os.path.join(release, 'bin', 'python')))


def normal(path):
    """A link's target in the form the layout compares; '' stays ''."""
    return os.path.normpath(path) if path else ''


def replaced_previous(current, target, previous):
    """What <root>/previous names after target became current: the release it replaced, if any."""
    return current if current not in ('', target) else previous


def plan(host, layout, name, rollback=False):
    """Read the layout and decide. Raises ReleaseError on a state that must not be acted on.

    Returns a dict: current, previous (the links as they are), release (the release the pin set
    names), target (the release that is to be current), new_previous, trusted (target), damaged,
    next ('' when target is ready, 'build' or 'repair').
    """
    current = normal(host.readlink(layout.path))
    previous = normal(host.readlink(layout.previous_link))
    release = layout.release(name)
    if not current and host.lexists(layout.path):
        raise ReleaseError('%s exists and is not a symlink (a venv built by hand?); move it away: only a link to a '
                           'release is replaced' % layout.path)
    state = dict(current=current, previous=previous, release=release, damaged=[])
    if rollback:
        if not previous or not is_trusted(host, previous):
            raise ReleaseError('ml_env_rollback: %s does not name a verified release (%s); nothing was changed'
                               % (layout.previous_link, previous or 'no previous release'))
        damaged, broken = host.integrity(previous)
        if broken or damaged:
            # Its profile is not at hand here to verify a repair against: applying that profile repairs it.
            raise ReleaseError('ml_env_rollback: the previous release %s is damaged (%s); nothing was changed; '
                               'apply the profile it was built from to repair it'
                               % (previous, broken or json.dumps(damaged)))
        state.update(target=previous, new_previous=current, trusted=True, next='')
        return state
    trusted = is_trusted(host, release)
    damaged, broken = [], ''
    if trusted:
        damaged, broken = host.integrity(release)
        trusted = not broken
    if not trusted and current == release:
        raise ReleaseError('the current release %s %s; it was changed by hand: roll back or point %s elsewhere '
                           'before rebuilding it' % (release, broken or NO_MARKER, layout.path))
    state.update(target=release, new_previous=replaced_previous(current, release, previous), trusted=trusted,
                 damaged=damaged if trusted else [], next='' if trusted and not damaged else
                 ('repair' if trusted else 'build'))
    return state


def prune_plan(host, layout, target, new_previous, keep):
    """(releases to remove, the previous link's release after pruning or '').

    The release now current always stays, then the previous one, then the most recently verified;
    a directory without a marker is a build that was killed before verification passed.
    """
    dirs = [layout.release(entry) for entry in host.listdir(layout.releases)
            if not entry.startswith('.') and host.is_release_dir(layout.release(entry))]
    verified = sorted((release for release in dirs if host.marker_mtime(release) is not None),
                      key=host.marker_mtime, reverse=True)
    ordered = []
    for release in [target] + ([new_previous] if new_previous else []) + verified:
        if release not in ordered:
            ordered.append(release)
    kept = ordered[:max(int(keep), 1)]
    remove = [release for release in dirs if release not in kept and release != target]
    return remove, (new_previous if new_previous in kept else '')


def ensure_site_files(host, release, site_packages, site_files, dry_run):
    """Write each {path, content} under the release's site-packages; the paths that changed."""
    changed = []
    for item in site_files:
        dest = os.path.join(release, site_packages, item['path'])
        if not host.file_differs(dest, item['content'], 0o644):
            continue
        changed.append(dest)
        if not dry_run:
            host.makedirs(os.path.dirname(dest))
            host.write_file(dest, item['content'])
    return changed


def make_current(host, layout, state, keep, site_packages='', site_files=(), dry_run=False, ready=True):
    """Site files on the target, the switch, the pruning; state from plan(). Returns the outcome.

    ready=False (check mode, a build pending) only predicts the switch: the site files and the
    pruning wait for the release to exist.
    """
    target, current, new_previous = state['target'], state['current'], state['new_previous']
    actions = []
    if ready and site_files:
        for path in ensure_site_files(host, target, site_packages, site_files, dry_run):
            actions.append('write %s' % path)
    if current != target:
        # The release being replaced is recorded first: a run killed in between leaves
        # previous == current, never a previous link that names nothing.
        if new_previous and normal(host.readlink(layout.previous_link)) != new_previous:
            actions.append('point %s at %s' % (layout.previous_link, new_previous))
            if not dry_run:
                host.link(new_previous, layout.previous_link)
        actions.append('point %s at %s' % (layout.path, target))
        if not dry_run:
            host.link(target, layout.path)
    previous = new_previous
    if ready:
        remove, previous = prune_plan(host, layout, target, new_previous, keep)
        for release in remove:
            actions.append('remove %s' % release)
            if not dry_run:
                host.remove_tree(release)
        if new_previous and not previous and host.lexists(layout.previous_link):
            actions.append('remove %s' % layout.previous_link)
            if not dry_run:
                host.remove_link(layout.previous_link)
    return dict(release=target, previous=previous, actions=actions)


def prepare_build(host, layout, release, dry_run):
    """The directory a build starts from: the releases directory there, no leftover of a build
    that never passed verification (a venv cannot be moved, so the build happens in place)."""
    actions = []
    if not host.isdir(layout.releases):
        actions.append('create %s' % layout.releases)
        if not dry_run:
            host.makedirs(layout.releases)
    if host.lexists(release):
        actions.append('remove %s (never verified)' % release)
        if not dry_run:
            host.remove_tree(release)
    return actions


def mark_verified(host, release, report, dry_run):
    """Keep the verification report and write the marker last: the marker alone makes a release
    trusted. Always rewritten: its time is what the integrity check compares file times with, and
    a repair leaves reinstalled files older than the run."""
    actions = ['write %s' % os.path.join(release, RECORDS, REPORT), 'write %s' % os.path.join(release, MARKER)]
    if not dry_run:
        host.makedirs(os.path.join(release, RECORDS))
        host.write_file(os.path.join(release, RECORDS, REPORT), json.dumps(report, indent=4, sort_keys=True) + '\n')
        host.write_file(os.path.join(release, MARKER), os.path.basename(release) + '\n')
    return actions


def remove_failed(host, layout, release, dry_run):
    """Remove a build that failed; never the current release."""
    if normal(host.readlink(layout.path)) == release or not host.lexists(release):
        return []
    if not dry_run:
        host.remove_tree(release)
    return ['remove %s' % release]


def describe(host, layout):
    """The layout as text, for --diff."""
    releases = [entry for entry in host.listdir(layout.releases) if not entry.startswith('.')]
    return '%s -> %s\n%s -> %s\nreleases: %s\n' % (
        layout.path, host.readlink(layout.path) or '(none)', layout.previous_link,
        host.readlink(layout.previous_link) or '(none)', ', '.join(releases) or '(none)')


def relative_problem(path):
    """Why path cannot be a path inside a release ('' when it can)."""
    parts = path.split('/')
    if not path or path.startswith('/') or '..' in parts or any(ord(char) < 32 for char in path):
        return 'must be a relative path without .. or control characters'
    return ''


def option_problems(params):
    """What makes the module's options unusable, one sentence each."""
    problems = []
    name = params['release']
    if not name or '/' in name or name in ('.', '..') or name.startswith('.') or any(ord(char) < 32 for char in name):
        problems.append('release %s is not a plain file name' % json.dumps(name))
    if params['keep'] < 1:
        problems.append('keep must be at least 1 (got %d)' % params['keep'])
    if params['site_packages'] and relative_problem(params['site_packages']):
        problems.append('site_packages %s %s' % (json.dumps(params['site_packages']), relative_problem(params['site_packages'])))
    if params['site_files'] and not params['site_packages']:
        problems.append('site_files need site_packages')
    for item in params['site_files']:
        if relative_problem(item['path']):
            problems.append('site_files path %s %s' % (json.dumps(item['path']), relative_problem(item['path'])))
    if os.path.normpath(params['path']) == os.path.normpath(params['root']):
        problems.append('path and root must differ')
    return problems


def run(host, layout, params, check_mode=False):
    """One module call. params: state, release, rollback, keep, site_packages, site_files, report.

    Returns the result dict (changed, actions, next, release, previous, ...). Raises ReleaseError.
    """
    what = params['state']
    name = params['release']
    release = layout.release(name)
    result = dict(changed=False, actions=[], next='', release=release, previous='',
                  current=normal(host.readlink(layout.path)), damaged=[])
    if what == 'absent':
        result['actions'] = remove_failed(host, layout, release, check_mode)
    elif what == 'staged':
        result['actions'] = ['write %s' % path for path in ensure_site_files(
            host, release, params['site_packages'], params['site_files'], check_mode)]
    elif what == 'verified':
        actions = mark_verified(host, release, params['report'] or {}, check_mode)
        current = normal(host.readlink(layout.path))
        state = dict(target=release, current=current,
                     new_previous=replaced_previous(current, release, normal(host.readlink(layout.previous_link))))
        outcome = make_current(host, layout, state, params['keep'], params['site_packages'], params['site_files'],
                               check_mode)
        result.update(outcome, actions=actions + outcome['actions'])
    else:
        state = plan(host, layout, name, params['rollback'])
        result.update(current=state['current'], damaged=state['damaged'], trusted=state['trusted'])
        actions = []
        if state['next'] == 'build':
            actions.append('build and verify release %s' % state['target'])
            if check_mode:
                outcome = make_current(host, layout, state, params['keep'], dry_run=True, ready=False)
            else:
                actions += prepare_build(host, layout, state['target'], False)
                outcome = dict(release=state['target'], previous=state['new_previous'], actions=[])
                result['next'] = 'build'
        elif state['next'] == 'repair':
            actions.append('reinstall %s in release %s and verify it again' % (
                ', '.join('%s==%s' % (item['name'], item['version']) for item in state['damaged']), state['target']))
            if check_mode:
                outcome = make_current(host, layout, state, params['keep'], params['site_packages'],
                                       params['site_files'], dry_run=True)
            else:
                outcome = dict(release=state['target'], previous=state['new_previous'], actions=[])
                result['next'] = 'repair'
        else:
            outcome = make_current(host, layout, state, params['keep'], params['site_packages'], params['site_files'],
                                   check_mode)
        result.update(outcome, actions=actions + outcome['actions'])
    result['changed'] = bool(result['actions'])
    return result
