# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module end to end, in-process, against the real SGLang stand-in (tests/fixtures/sglang_standin)
run by the `process` manager: real processes, a real log, real HTTP."""

from __future__ import annotations

import os
import socket
import time

import pytest
import yaml

from module_harness import assert_documented, assert_options_match_spec, record_argument_spec

from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs
from ansible_collections.inferops.gpu.plugins.modules import sglang_server

# The `server` fixture (conftest.py) runs the real SGLang stand-in.


def tree_gone(pids):
    return not any(procfs.alive(p) for p in pids)


def test_start_is_gated_on_generation_and_a_second_start_changes_nothing(server):
    result = server['run'](revision='r1')
    assert result['ready'] and result['changed'] and result['action'] == 'start'
    assert result['sample']['completion_tokens'] >= 1 and result['served_model_name'] == 'standin'
    assert result['port_open_seconds'] is not None and result['port_open_seconds'] <= result['startup_seconds']
    assert len(result['pids']) >= 1
    again = server['run'](revision='r1')
    assert again['changed'] is False and again['ready'] and again['pids'] == result['pids']
    assert server['run'](state='healthy')['ready']


@pytest.mark.parametrize('forget_the_record', [False, True])
def test_a_rotated_log_does_not_make_a_serving_server_unready(server, forget_the_record):
    # logrotate's copytruncate empties the log the server keeps writing: its start marker and ready
    # line are gone. The run that passed the gate is ready by its record (ready.json); without one
    # (a start at boot the gate never watched) the log cannot tell, and HTTP decides.
    first = server['run'](revision='r1')
    log = server['base']['log_path']
    with open(log, 'r+') as handle:
        handle.truncate(0)
    if forget_the_record:
        os.remove(os.path.join(os.path.dirname(log), 'ready.json'))
    again = server['run'](revision='r1', timeout=5)
    assert again['ready'] and again['changed'] is False and again['action'] == 'none'
    assert again['pids'] == first['pids']


def test_the_rollback_probes_with_the_restored_units_settings(server, tmp_path):
    # The inventory (the failed new input) names another port, key and served name; the restored unit
    # and its config name the server that runs. settings_from_unit needs the systemd manager.
    unit = tmp_path / 'sglang-server.service'
    config = tmp_path / 'sglang-server.yaml'
    config.write_text('api-key: "sk-restored-key-1"\n')
    base = server['base']
    unit.write_text('[Service]\nExecStart=/py -m sglang.launch_server --config %s --port %d --served-model-name standin\n'
                    % (config, base['port']))
    refused = server['run'](settings_from_unit=str(unit))
    assert refused['failed'] and 'settings_from_unit needs manager=systemd' in refused['msg']
    from ansible_collections.inferops.gpu.plugins.module_utils.sglang.unit_settings import read_settings
    settings = read_settings(str(unit))
    assert settings['port'] == base['port'] and settings['api_key'] == 'sk-restored-key-1'
    assert settings['served_model_name'] == 'standin'


def test_another_revision_restarts_and_stop_leaves_nothing(server):
    first = server['run'](revision='r1')
    second = server['run'](revision='r2')
    assert second['changed'] and second['action'] == 'restart'
    assert set(second['stopped_before']) == set(first['pids']) and tree_gone(first['pids'])
    # A stop needs no command line (the pidfile names the server): as a role's stop task calls it.
    stopped = server['run'](state='stopped', command=None, environment={})
    assert stopped['changed'] and tree_gone(second['pids']) and stopped['revision_removed']
    # The operator's stop is kept: no revision is left for a rollback to bring back.
    run_dir = os.path.dirname(server['base']['log_path'])
    assert not os.path.exists(os.path.join(run_dir, 'revision')) and not os.path.exists(os.path.join(run_dir, 'ready.json'))
    assert server['run'](state='stopped')['changed'] is False


@pytest.mark.parametrize('fault,cause', [
    ('cudnn_guard', 'cudnn_guard'), ('abi', 'abi_mismatch'), ('rank_crash', 'rank_crash'),
    ('kv_oom', 'kv_pool_oom'), ('exit_unknown', 'unknown'), ('graph_oom', 'cuda_graph_oom'),
    ('nccl_error', 'nccl'), ('warmup_failed', 'warmup_failed'), ('kernel_too_old', 'kernel_libs_too_old'),
    ('flashinfer_mismatch', 'flashinfer_mismatch'),
])
def test_each_scripted_failure_fails_fast_with_its_cause_and_leaves_nothing(server, fault, cause):
    (server['tmp'] / 'fault').write_text(fault + '\n')
    started = time.monotonic()
    # exit_unknown's delay counts from the launcher's start, so it must end well inside load + warm-up
    # (0.9 s): at 1 s a gate that acts on its first finished round saw the server ready first.
    result = server['run'](env={'SGLANG_STANDIN_FAULT_DELAY': '0.2'})
    took = time.monotonic() - started
    assert result['failed'] and result['cause'] == cause, result['msg']
    assert took < 10, took
    assert result['fix'] and result['log_tail']
    assert tree_gone(result['pids'] + result['cleanup']['stopped_pids'])
    assert not os.path.exists(os.path.join(str(server['tmp']), 'log', 'revision'))


def test_a_crash_right_after_ready_fails_the_gate(server):
    # The ready line alone is not ready: the gate's own probes meet the crash of the first request.
    (server['tmp'] / 'fault').write_text('crash_after_ready\n')
    result = server['run']()
    assert result['failed'] and result['cause'] == 'rank_crash', result['msg']
    assert 'ready to roll' in ' '.join(result['log_tail'])
    assert tree_gone(result['cleanup']['stopped_pids'])


def test_a_silent_hang_fails_on_the_stall_timer(server):
    (server['tmp'] / 'fault').write_text('hang\n')
    started = time.monotonic()
    result = server['run'](stall_timeout=2)
    assert result['cause'] == 'stalled' and time.monotonic() - started < 8
    assert tree_gone(result['cleanup']['stopped_pids'])


def test_503_forever_ends_at_the_deadline_naming_the_health_answer(server):
    (server['tmp'] / 'fault').write_text('unhealthy\n')
    # The warmup request never ends, and SGLang's drain waits for it: the stop's timeout ends it (SIGKILL).
    result = server['run'](timeout=5, stop_timeout=2)
    assert result['cause'] == 'timeout' and '503' in result['msg'] and result['phase'] == 'warmup'


def test_a_taken_port_is_named(server):
    holder = socket.socket()
    holder.bind(('127.0.0.1', server['base']['port']))
    holder.listen(1)
    try:
        # Its uvicorn never binds and the process waits on its warmup thread, deaf to SIGTERM (real
        # uvicorn joins the warmup in its lifespan): the stop's timeout ends it.
        result = server['run'](timeout=20, stop_timeout=2)
    finally:
        holder.close()
    assert result['cause'] == 'port_in_use'


def test_the_api_key_is_used_and_never_shown(server):
    key = 'sk-inferops-secret-123'
    config = server['tmp'] / 'server.yaml'
    config.write_text('api-key: %s\n' % key)
    command = server['base']['command'] + ['--config', str(config)]
    result = server['run'](command=command, api_key=key)
    assert result['ready']
    assert key not in repr(result)
    with open(server['base']['log_path']) as handle:
        assert key in handle.read()  # the server echoes it: that is why the role keeps the log 0640
    unauthorized = server['run'](state='healthy', api_key='wrong')
    assert unauthorized['failed'] and '401' in unauthorized['msg']


def test_check_mode_starts_nothing(server, tmp_path):
    result = server['run'](_ansible_check_mode=True)
    assert result['changed'] and result['action'] == 'start'
    assert not os.path.exists(str(tmp_path / 'log' / 'sglang-server.pid'))


@pytest.mark.parametrize('overrides,expect', [
    ({'timeout': 0}, 'timeout must be at least 1 (got 0)'),
    ({'port': 70000}, 'port must be at most 65535 (got 70000)'),
    ({'poll_interval': 0}, 'poll_interval must be at least 0.01 (got 0.0)'),
    ({'command': None}, 'command'),
])
def test_bad_options_fail_before_anything_runs(server, overrides, expect):
    result = server['run'](**overrides)
    assert result['failed'] and expect in result['msg']
    assert not os.path.exists(str(server['tmp'] / 'log' / 'sglang-server.pid'))


def test_documentation_matches_the_argument_spec_and_the_result(server, monkeypatch):
    seen = record_argument_spec(monkeypatch, sglang_server)
    result = server['run']()
    assert_options_match_spec(sglang_server, seen)
    returns = yaml.safe_load(sglang_server.RETURN)
    assert set(result) - {'changed', 'invocation'} <= set(returns)
    for key in ('ready', 'action', 'phase', 'pids', 'log_path', 'progress_path', 'log_tail', 'stopped_before'):
        assert_documented(result[key], returns[key], key)
    stopped = server['run'](state='stopped')
    assert set(stopped) - {'changed', 'invocation'} <= set(returns)
    assert_documented(stopped['stopped_pids'], returns['stopped_pids'], 'stopped_pids')
    for example in yaml.safe_load(sglang_server.EXAMPLES):
        assert set(example['inferops.gpu.sglang_server']) <= set(seen['argument_spec'])
