# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The settings the health gate probes with, read from a server's unit file and its --config file.

A roll's rollback puts back the unit and config of the server that served before; the inventory
then describes the failed new state (another port, key or served name). Probing the restored
server with those would fail a healthy server, so the rollback reads what it probes from the files
it restored: `ExecStart=` of the unit (as the sglang_server role writes it: one line, words quoted
for systemd when needed) and the `api-key` of the `--config` file it names.
"""

from __future__ import annotations

import json
import shlex

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.versions import prints_info

# Options of SGLang's launch_server the gate needs, and what they set.
_VALUED = {'--host': 'host', '--port': 'port', '--served-model-name': 'served_model_name',
           '--node-rank': 'node_rank', '--config': 'config', '--log-level': 'log_level'}


class SettingsError(Exception):
    pass


def exec_start(unit_text):
    """The argv of the unit's ExecStart= (systemd's quoting as the role writes it; %% and $$ unescaped)."""
    for line in unit_text.splitlines():
        key, sep, value = line.strip().partition('=')
        if sep and key.strip() == 'ExecStart':
            try:
                words = shlex.split(value.strip().lstrip('-@:+!'), posix=True)
            except ValueError as exc:
                raise SettingsError('ExecStart= cannot be read: %s' % exc)
            return [word.replace('%%', '%').replace('$$', '$') for word in words]
    raise SettingsError('the unit has no ExecStart= line')


def _values(unit_text, key):
    """The values of every `key=` line of the unit, in order."""
    found = []
    for line in unit_text.splitlines():
        name, sep, value = line.strip().partition('=')
        if sep and name.strip() == key:
            found.append(value.strip())
    return found


def _last(unit_text, key):
    return (_values(unit_text, key) or [''])[-1]


def unit_launch(unit_text):
    """How the unit starts its server, as systemd reads the lines the role writes: {python (ExecStart='s first word),
    user, group, cwd, environment ({name: value} of Environment=), environment_files (EnvironmentFile=, in order; a
    leading - marks an optional one)}."""
    environment = {}
    for value in _values(unit_text, 'Environment'):
        try:
            words = shlex.split(value, posix=True)
        except ValueError as exc:
            raise SettingsError('Environment= cannot be read: %s' % exc)
        for word in words:
            name, sep, assigned = word.replace('%%', '%').replace('$$', '$').partition('=')
            if sep:
                environment[name] = assigned
    return {'python': exec_start(unit_text)[0], 'user': _last(unit_text, 'User'), 'group': _last(unit_text, 'Group'),
            'cwd': _last(unit_text, 'WorkingDirectory') or '/', 'environment': environment,
            'environment_files': _values(unit_text, 'EnvironmentFile')}


def options(argv):
    """{host, port, served_model_name, node_rank, config, log_level: the last value given, skip_warmup}."""
    found = {'skip_warmup': '--skip-server-warmup' in argv}
    words = iter(argv)
    for word in words:
        name, sep, value = word.partition('=')
        if name in _VALUED:
            found[_VALUED[name]] = value if sep else next(words, '')
    return found


def config_api_key(text):
    """The api-key of SGLang's --config YAML as the role writes it (`api-key: "<JSON string>"`), or None."""
    for line in text.splitlines():
        key, sep, value = line.partition(':')
        if sep and key.strip() in ('api-key', 'api_key'):
            value = value.strip()
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = value.strip('\'"')
            return str(parsed) if parsed not in (None, '') else None
    return None


def read_settings(unit_path, read=None):
    """The gate's settings of the server the unit runs: host, port, served_model_name, api_key,
    skip_warmup, ready_line (a log level that prints it), probe (rank 0 of a multi-node launch only). read(path) -> text (injected for tests)."""
    read = read or _read
    try:
        found = options(exec_start(read(unit_path)))
    except (IOError, OSError) as exc:
        raise SettingsError('cannot read %s: %s' % (unit_path, exc))
    except SettingsError as exc:
        raise SettingsError('%s: %s' % (unit_path, exc))
    try:
        port = int(found.get('port') or 30000)
        rank = int(found.get('node_rank') or 0)
    except ValueError:
        raise SettingsError('%s: --port and --node-rank must be whole numbers (got %r, %r)'
                            % (unit_path, found.get('port'), found.get('node_rank')))
    settings = {'host': found.get('host') or '127.0.0.1', 'port': port,
                'served_model_name': found.get('served_model_name') or None,
                'skip_warmup': found['skip_warmup'], 'ready_line': prints_info(found.get('log_level')),
                'probe': rank == 0, 'api_key': None}
    if found.get('config'):
        try:
            settings['api_key'] = config_api_key(read(found['config']))
        except (IOError, OSError) as exc:
            raise SettingsError('cannot read the --config file %s of %s: %s' % (found['config'], unit_path, exc))
    return settings


def _read(path):
    with open(path) as handle:
        return handle.read()
