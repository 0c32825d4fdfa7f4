# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway's launcher adds the keys from the 0600 file inside the process, never to argv."""

from __future__ import annotations

import json
import os
import runpy
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LAUNCHER = os.path.join(ROOT, 'roles', 'sglang_gateway', 'files', 'sglang-gateway-launch')


def launcher():
    return runpy.run_path(LAUNCHER, run_name='launcher')


def test_the_keys_join_the_arguments_only_when_set():
    build = launcher()['build_argv']
    config = {'argv': ['--host', '127.0.0.1', '--port', '30080']}
    assert build(config, {'control_plane_api_key': '', 'worker_api_key': ''}) == config['argv']
    assert build(config, {'control_plane_api_key': 'c' * 20, 'worker_api_key': 'w' * 20}) == config['argv'] + [
        '--control-plane-api-keys', 'inferops:inferops.gpu:admin:' + 'c' * 20, '--api-key=' + 'w' * 20]
    assert config['argv'] == ['--host', '127.0.0.1', '--port', '30080']


def test_a_key_that_starts_with_a_dash_reaches_smg_whole():
    """Issue 41: one random URL-safe key in 64 starts with '-'; as a separate word argparse takes it for an option.
    The options as smg 1.13.0 defines them (smg/router_args.py: --api-key type=str; --control-plane-api-keys
    nargs='*', action='extend')."""
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument('--api-key', type=str, default=None)
    parser.add_argument('--control-plane-api-keys', type=str, nargs='*', action='extend', default=[])
    key, control = '-Xq3' + 'w' * 40, '-c' + 'c' * 40
    argv = launcher()['build_argv']({'argv': []}, {'control_plane_api_key': control, 'worker_api_key': key})
    parsed = parser.parse_args(argv)
    assert parsed.api_key == key and parsed.control_plane_api_keys == ['inferops:inferops.gpu:admin:' + control]


def test_main_hands_smg_the_arguments_with_the_keys(tmp_path, monkeypatch):
    secrets = tmp_path / 'secrets.json'
    secrets.write_text(json.dumps({'control_plane_api_key': 'k' * 16, 'worker_api_key': ''}))
    config = tmp_path / 'gateway.json'
    config.write_text(json.dumps({'argv': ['--port', '30080'], 'secrets': str(secrets)}))
    seen = {}
    fake = types.ModuleType('smg.launch_router')
    fake.parse_router_args = lambda argv: ('parsed', argv)
    fake.launch_router = lambda args: seen.setdefault('args', args)
    monkeypatch.setitem(sys.modules, 'smg', types.ModuleType('smg'))
    monkeypatch.setitem(sys.modules, 'smg.launch_router', fake)
    launcher()['main'](str(config))
    assert seen['args'] == ('parsed', ['--port', '30080', '--control-plane-api-keys', 'inferops:inferops.gpu:admin:' + 'k' * 16])
