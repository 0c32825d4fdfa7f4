# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd's EnvironmentFile= format, read as systemd reads it (the process manager and the runtime
environment's check start processes with the same files)."""

from __future__ import annotations

import re

_ESCAPED = re.compile(r'\\(.)')


def environment_lines(text):
    """{NAME: (value, line number)}: # and ; comments, optional quotes (double quotes with backslash escapes),
    no variable expansion; a name set twice keeps its last line, as systemd does."""
    env = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(('#', ';')) or '=' not in line:
            continue
        name, value = line.split('=', 1)
        name, value = name.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in '"\'':
            value = _ESCAPED.sub(r'\1', value[1:-1]) if value[0] == '"' else value[1:-1]
        env[name] = (value, number)
    return env


def parse_environment_file(text):
    """{NAME: value} of an EnvironmentFile= text."""
    return {name: value for name, (value, _number) in environment_lines(text).items()}
