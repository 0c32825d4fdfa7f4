# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollback probes the server its restored unit and config describe, not the failed new input."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.unit_settings import (
    SettingsError, config_api_key, exec_start, read_settings,
)

# As roles/sglang_server/templates/unit.j2 renders it (a word with a space, % and $ quoted for systemd).
UNIT = '''# Ansible managed
[Service]
Type=exec
EnvironmentFile=/etc/inferops/runtime-env.env
Environment="HF_HOME=/var/cache/sglang/huggingface"
ExecStart=/opt/ml-env/bin/python -m sglang.launch_server --config /etc/sglang/sglang-server.yaml %s
Restart=on-failure
''' % '--model-path "/srv/models/a b" --host 0.0.0.0 --port 30001 --served-model-name "kimi 100%%" --tp 8 --chat-template "$${HOME}/t"'
CONFIG = '''# Ansible managed
# SGLang's --config file
api-key: "sk-old-\\"key"
'''


def files(**extra):
    texts = {'/etc/systemd/system/sglang-server.service': UNIT, '/etc/sglang/sglang-server.yaml': CONFIG}
    texts.update(extra)

    def read(path):
        if path not in texts:
            raise IOError(2, 'No such file or directory')
        return texts[path]
    return read


def test_the_restored_units_settings_are_read_back():
    settings = read_settings('/etc/systemd/system/sglang-server.service', files())
    assert settings == {'host': '0.0.0.0', 'port': 30001, 'served_model_name': 'kimi 100%', 'api_key': 'sk-old-"key',
                        'skip_warmup': False, 'ready_line': True, 'probe': True}
    assert exec_start(UNIT)[-2:] == ['--chat-template', '${HOME}/t']


def test_warmup_node_rank_and_equals_forms():
    unit = UNIT.replace('--tp 8', '--tp=8 --node-rank=1 --skip-server-warmup').replace('--port 30001', '--port=30002')
    settings = read_settings('/u', files(**{'/u': unit}))
    assert settings['port'] == 30002 and settings['skip_warmup'] and settings['probe'] is False


def test_a_log_level_that_hides_info_lines_means_no_ready_line():
    for level, prints in (('warning', False), ('ERROR', False), ('info', True), ('debug', True)):
        unit = UNIT.replace('--tp 8', '--tp 8 --log-level %s' % level)
        assert read_settings('/u', files(**{'/u': unit}))['ready_line'] is prints, level
    unit = UNIT.replace('--tp 8', '--log-level=warning')
    assert read_settings('/u', files(**{'/u': unit}))['ready_line'] is False


def test_defaults_without_the_options_and_a_config_without_a_key():
    unit = '[Service]\nExecStart=/py -m sglang.launch_server --config /c.yaml --model-path /m\n'
    settings = read_settings('/u', files(**{'/u': unit, '/c.yaml': '# no key\n'}))
    assert settings == {'host': '127.0.0.1', 'port': 30000, 'served_model_name': None, 'api_key': None,
                        'skip_warmup': False, 'ready_line': True, 'probe': True}
    assert config_api_key("api-key: plain\n") == 'plain' and config_api_key('api-key: ""\n') is None


@pytest.mark.parametrize('unit,expected', [
    (None, 'cannot read /u'),
    ('[Service]\nType=exec\n', '/u: the unit has no ExecStart= line'),
    ('[Service]\nExecStart=/py --port "unclosed\n', '/u: ExecStart= cannot be read'),
    ('[Service]\nExecStart=/py --port abc\n', '--port and --node-rank must be whole numbers'),
    ('[Service]\nExecStart=/py --config /gone.yaml\n', 'cannot read the --config file /gone.yaml of /u'),
])
def test_an_unreadable_unit_or_config_is_named(unit, expected):
    read = files(**({'/u': unit} if unit else {}))
    with pytest.raises(SettingsError, match=expected.replace('(', r'\(')):
        read_settings('/u', read)
