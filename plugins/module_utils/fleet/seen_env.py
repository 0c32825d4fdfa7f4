# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report's column of what the server's Python sees (issue 42): the release's interpreter started as the
unit starts it (its User=, Group=, WorkingDirectory=, Environment= and EnvironmentFile= lines, read from the unit
file the report already reads), site initialisation run, and each variable of runtime_env's spec held against what
the unit's environment gives it (runtime_env's file, the unit's own file, which may override one on purpose).

A sitecustomize.py edited by hand after the collection took the host over shows here: its assignment beats the
start-up hook inside the interpreter while /proc/PID/environ of the running server still shows the spec. The part is
{differs: ['NAME=value (file line N)'], problems, error}, or None (no unit, no spec: '-' in the report); a read that
fails is an error in the part, never a failure of the report.
"""

from __future__ import annotations

import json

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout
from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import effective
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.unit_settings import SettingsError, unit_launch


def _files(host, paths):
    files = []
    for path in paths:
        optional = path.startswith('-')
        path = path[1:] if optional else path
        text = host.read_text(path)
        if text is None and not optional:
            raise IOError('cannot read the environment file %s' % path)
        if text is not None:
            files.append((path, text))
    return files


def seen_part(host, unit_text, spec_text, setpriv='setpriv'):
    """{'environment_seen': None or {differs, problems, error}}."""
    if not unit_text or not spec_text:
        return {'environment_seen': None}
    try:
        launch = unit_launch(unit_text)
        spec = json.loads(spec_text)
        wanted = dict((str(name), str(value)) for name, value in (spec.get('vars') or {}).items())
        env, origin = effective.build_env(effective.base_environment('systemd', user=launch['user']),
                                          launch['environment'], _files(host, launch['environment_files']))
    except (SettingsError, ValueError, AttributeError, IOError, KeyError) as exc:
        return {'environment_seen': {'differs': [], 'problems': [], 'error': 'not read: %s' % exc}}
    # The unit's own file may set a spec variable on purpose (its value wins in the unit): that is what it must see.
    expected = dict((name, env.get(name, value)) for name, value in wanted.items())
    try:
        result = effective.check(host.run, launch['python'], env, origin, launch['cwd'], expected,
                                 spec.get('path_prepend') or [], {}, launch['user'], launch['group'], setpriv)
    except (effective.ProbeError, CommandTimeout, OSError) as exc:
        return {'environment_seen': {'differs': [], 'problems': [], 'error': str(exc)[:300]}}
    seen = result['environ']
    differs = ['%s=%s (%s)' % (name, seen.get(name) if seen.get(name) is not None else '<unset>', result['setters'][name])
               for name in sorted(expected) if seen.get(name) != expected[name]]
    differs += ['PATH (%s)' % result['setters']['PATH'] for problem in result['problems'] if problem.startswith('PATH:')]
    return {'environment_seen': {'differs': differs, 'problems': result['problems'], 'error': ''}}
