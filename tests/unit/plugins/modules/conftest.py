# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_server module's tests' server: the real SGLang stand-in run by the `process` manager."""

from __future__ import annotations

import os
import sys

import pytest

from module_harness import SGLANG_STANDIN, invoke, patch_exits
from ports import free_port

from ansible_collections.inferops.gpu.plugins.modules import sglang_server

STANDIN = SGLANG_STANDIN


@pytest.fixture
def server(tmp_path, monkeypatch):
    """{'base': the module's arguments, 'tmp', 'run'(**overrides; env= adds to the environment)}; a
    2-rank stand-in ready in about a second, stopped at the end."""
    patch_exits(monkeypatch)
    port = free_port()
    model = tmp_path / 'model'
    model.mkdir()
    base = {
        'manager': 'process', 'log_path': str(tmp_path / 'log' / 'server.log'), 'port': port,
        'command': [sys.executable, '-m', 'sglang.launch_server', '--model-path', str(model), '--port', str(port),
                    '--tp', '2', '--served-model-name', 'standin'],
        'environment': {'PYTHONPATH': os.path.abspath(STANDIN), 'SGLANG_STANDIN_LOAD_SECONDS': '0.6',
                        'SGLANG_STANDIN_WARMUP_SECONDS': '0.3', 'SGLANG_STANDIN_GPU': '0',
                        # SGLang's drain watchdog ticks every 5 s; the stops here need not wait that long.
                        'SGLANG_STANDIN_DRAIN_POLL_SECONDS': '0.2',
                        'SGLANG_STANDIN_FAULT_FILE': str(tmp_path / 'fault')},
        'served_model_name': 'standin', 'stall_timeout': 20, 'timeout': 60,
    }
    (tmp_path / 'log').mkdir()
    state = {'base': base, 'tmp': tmp_path}

    def run(**overrides):
        args = dict(base)
        env = dict(base['environment'])
        env.update(overrides.pop('env', {}))
        args['environment'] = env
        args.update(overrides)
        return invoke(sglang_server, args)
    state['run'] = run
    yield state
    # A 0.5.23 follower waits for rank 0's ShutdownReq and ignores SIGTERM: the stop's timeout ends it.
    invoke(sglang_server, dict(base, state='stopped', stop_timeout=3))
