# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a role's input checks must see of a host, in one call.

A role's validate entry point judged its input on the host through a stat per path, a command per
interpreter and a slurp per file: each a remote Python start, on every run of every playbook
(the check play of site.yml and rolling.yml reads every role's input). ``probe`` answers them all
at once, in the shapes the checks were written for (``plugins/module_utils/*_input.py`` and the
bad-input tables in ``tests/bad_inputs/`` carry recorded results of those modules):

- a stat: ``{'stat': {'exists': False}}``, or ``exists``, ``isreg``, ``isdir``, ``islnk``,
  ``executable`` (for the user the module runs as) and ``lnk_source`` of a link, as the stat module
  gives them; ``{'skipped': True}`` for an empty path;
- a command: ``{'rc', 'stdout', 'stderr'}``, or ``{'skipped': True}`` when the stat it names is not
  an executable file at an absolute path (the command is never run from wherever the module runs);
- a file: ``{'content': base64}`` as slurp gives it, or ``{'failed': True, 'msg': ...}``.

The host comes in through ``Host`` and the commands through ``run``, so the answers are tested on
real directory trees and recorded runs.
"""

from __future__ import annotations

import base64
import os
import stat as stat_module


class Host:
    """The filesystem as this module reads it."""

    def stat(self, path, follow):
        try:
            return os.stat(path) if follow else os.lstat(path)
        except OSError:
            return None

    def executable(self, path):
        return os.access(path, os.X_OK)

    def readlink(self, path):
        try:
            return os.path.realpath(path)
        except OSError:
            return None

    def read(self, path):
        with open(path, 'rb') as handle:
            return handle.read()


def stat_path(host, path, follow=True):
    """The stat module's answer for `path`, reduced to the fields the checks read."""
    if not path:
        return {'skipped': True}
    seen = host.stat(path, follow)
    if seen is None:
        return {'stat': {'exists': False}}
    mode = seen.st_mode
    found = {'exists': True, 'isreg': stat_module.S_ISREG(mode), 'isdir': stat_module.S_ISDIR(mode),
             'islnk': stat_module.S_ISLNK(mode), 'executable': host.executable(path)}
    if found['islnk']:
        found['lnk_source'] = host.readlink(path)
    return {'stat': found}


def run_probe(run, argv, stat):
    """The command's result, or skipped when `stat` is not of an executable file at an absolute path."""
    seen = (stat or {}).get('stat') or {}
    if not argv or not os.path.isabs(argv[0]) or not (seen.get('exists') and seen.get('isreg') and seen.get('executable')):
        return {'skipped': True}
    rc, out, err = run(list(argv))
    return {'rc': rc, 'stdout': out.strip(), 'stderr': err.strip()}


def read_file(host, path):
    """slurp's answer for `path` (content in base64), or a failure saying why."""
    try:
        return {'content': base64.b64encode(host.read(path)).decode('ascii')}
    except (IOError, OSError) as exc:
        return {'failed': True, 'msg': 'cannot read %s: %s' % (path, exc)}


def probe(host, run, params, check_mode):
    """stats: {name: {path, follow}}; commands: {name: {argv, stat}} (`stat` names the stat of the
    executable); files: {name: path}. Every answer keyed by its name."""
    stats = dict((name, stat_path(host, spec.get('path') or '', spec.get('follow', True)))
                 for name, spec in (params.get('stats') or {}).items())
    commands = {}
    for name, spec in (params.get('commands') or {}).items():
        commands[name] = run_probe(run, spec.get('argv') or [], stats.get(spec.get('stat') or ''))
    files = dict((name, read_file(host, path)) for name, path in (params.get('files') or {}).items() if path)
    return dict(changed=False, check_mode=bool(check_mode), stats=stats, commands=commands, files=files)
