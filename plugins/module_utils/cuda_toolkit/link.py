# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The default toolkit link (/usr/local/cuda): point it at one toolkit, or put it back.

NVIDIA's packages register /usr/local/cuda with update-alternatives (the link then goes through
/etc/alternatives/cuda) and runfiles point it at the version they install. The role leaves the
link as it found it unless asked to own it. ``plan_*`` decide from what ``read_link`` saw and
return steps; ``Host`` carries them out, so the decisions are tested without a root filesystem.
"""

from __future__ import annotations

import os
import stat as stat_module

from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import replace_symlink

ALTERNATIVES_LINK = '/etc/alternatives/cuda'


def read_link(path, lstat=os.lstat, readlink=os.readlink, realpath=os.path.realpath):
    """What is at path: {'state': absent|link|directory|file, 'src': the link's text, 'resolved': its real path}."""
    try:
        found = lstat(path)
    except OSError:
        return dict(state='absent', src='', resolved='')
    if stat_module.S_ISLNK(found.st_mode):
        return dict(state='link', src=readlink(path), resolved=realpath(path))
    return dict(state='directory' if stat_module.S_ISDIR(found.st_mode) else 'file', src='', resolved='')


def plan_link(path, now, src):
    """Steps that make the link point at src. A directory or file there is never replaced."""
    if now['state'] == 'link' and now['src'] == src:
        return []
    if now['state'] not in ('absent', 'link'):
        raise ValueError('%s is a %s, not a symlink; move it away to let the role manage the default link'
                         % (path, now['state']))
    return [('link', src)]


def plan_restore(path, now, previous, home, alternatives):
    """Steps that put the link back where it resolved to before installing.

    now: read_link after installing. previous: what the link resolved to before ('' when there
    was none). home: the toolkit just installed (what an installer registered as an alternative).
    alternatives: the paths `update-alternatives --list cuda` gives, or None when not read.
    """
    if now['resolved'] == previous:
        return []
    if not previous:
        # There was none: drop the one the installer made (and its alternative).
        return [('remove_alternative', home)] + ([('remove_link',)] if now['state'] == 'link' else [])
    if now['state'] not in ('absent', 'link'):
        raise ValueError('%s is a %s, not a symlink; it resolved to %s before installing' % (path, now['state'], previous))
    if now['src'] == ALTERNATIVES_LINK and alternatives is not None and previous in alternatives:
        return [('set_alternative', previous)]
    return [('link', previous)]


def needs_alternatives(now, previous):
    """Whether plan_restore must know the registered alternatives."""
    return bool(previous) and now['resolved'] != previous and now['src'] == ALTERNATIVES_LINK


def parse_alternatives(text):
    return [line.strip() for line in text.splitlines() if line.strip()]


def describe(step, path):
    kind = step[0]
    if kind == 'link':
        return 'point %s at %s' % (path, step[1])
    if kind == 'remove_link':
        return 'remove %s' % path
    if kind == 'set_alternative':
        return 'update-alternatives --set cuda %s' % step[1]
    return 'update-alternatives --remove cuda %s' % step[1]


class Host:
    """Carries out the steps. run_command: (argv) -> (rc, out, err), bounded by the caller;
    update_alternatives: its path, or None where the host has none."""

    def __init__(self, run_command, update_alternatives):
        self.run_command = run_command
        self.update_alternatives = update_alternatives

    def alternatives(self):
        if not self.update_alternatives:
            return None
        rc, out, dummy = self.run_command([self.update_alternatives, '--list', 'cuda'])
        return parse_alternatives(out) if rc == 0 else []

    def apply(self, step, path):
        kind = step[0]
        if kind == 'link':
            replace_symlink(path, step[1])
        elif kind == 'remove_link':
            if os.path.islink(path):
                os.remove(path)
        elif kind == 'set_alternative':
            rc, out, err = self.run_command([self.update_alternatives, '--set', 'cuda', step[1]])
            if rc != 0:
                raise OSError('update-alternatives --set cuda %s failed (rc=%d): %s' % (step[1], rc, (err or out).strip()))
        elif self.update_alternatives:
            # Not registered is the usual case (a runfile, or the package made no alternative).
            self.run_command([self.update_alternatives, '--remove', 'cuda', step[1]])


def run(host, params, check_mode=False, read=read_link):
    """One module call: params path, state (present or restored), src, previous, home."""
    path = params['path']
    now = read(path)
    if params['state'] == 'present':
        steps = plan_link(path, now, params['src'])
    else:
        alternatives = host.alternatives() if needs_alternatives(now, params['previous']) else None
        steps = plan_restore(path, now, params['previous'], params['home'], alternatives)
    if not check_mode:
        for step in steps:
            host.apply(step, path)
    after = read(path) if steps and not check_mode else now
    if check_mode and steps:
        predicted = [step for step in steps if step[0] in ('link', 'remove_link', 'set_alternative')][-1:]
        if predicted and predicted[0][0] == 'remove_link':
            after = dict(state='absent', src='', resolved='')
        elif predicted:
            after = dict(state='link', src=ALTERNATIVES_LINK if predicted[0][0] == 'set_alternative' else predicted[0][1],
                         resolved=predicted[0][1])
    result = dict(changed=bool(steps), actions=[describe(step, path) for step in steps], path=path,
                  state=after['state'], src=after['src'], resolved=after['resolved'])
    result['diff'] = dict(before=dict(path=path, state=now['state']), after=dict(path=path, state=after['state']))
    for side, seen in (('before', now), ('after', after)):
        if seen['src']:
            result['diff'][side]['src'] = seen['src']
    return result
