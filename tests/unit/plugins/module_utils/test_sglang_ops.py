# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The states: when to (re)start, what a failed start leaves behind, waiting for the GPUs."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.ops import OperationFailed, Operations


class Manager:
    def __init__(self, running=True):
        self.running = running
        self.events = []
        self.run = 1

    def main_pid(self):
        return 100 if self.running else None

    def identity(self):
        return 'inv-%d' % self.run if self.running else None

    def pids(self):
        return [100, 101] if self.running else []

    def start(self):
        self.events.append('start')
        self.running = True
        self.run += 1

    def stop(self, timeout):
        self.events.append('stop')
        self.stop_timeouts = getattr(self, 'stop_timeouts', []) + [timeout]
        pids, self.running = self.pids(), False
        return pids, []


class GateStub:
    def __init__(self, ready=True):
        self.ready = ready
        self.log = type('Log', (), {'tail': []})()

    def run(self):
        if self.ready:
            return {'ready': True, 'phase': 'ready', 'startup_seconds': 1.0}
        return {'ready': False, 'phase': 'loading', 'cause': 'cuda_oom', 'msg': 'boom'}


class ProbeStub:
    sample = {'completion_tokens': 8}
    served_model_name = 'm'
    model_info = {}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def ops(tmp_path, manager, ready=True, gate_ready=True, revision='r2', recorded='r1', gpu=None, check_mode=False,
        seen=None):
    """seen: a list that gets the `served` argument of every health check and gate."""
    if recorded is not None:
        (tmp_path / 'revision').write_text(recorded + '\n')
    clock = Clock()
    gpu = gpu if gpu is not None else (lambda: None)
    seen = seen if seen is not None else []

    def health(served):
        seen.append(('health', served))
        return ready if not callable(ready) else ready(served), None if ready else '503', ProbeStub()

    def gate(attach, served):
        seen.append(('gate', attach, served))
        return GateStub(gate_ready)
    return Operations(manager, gate, health, gpu, str(tmp_path), check_mode=check_mode, revision=revision,
                      gpu_release_timeout=5, clock=clock, sleep=clock.sleep)


def test_started_leaves_a_ready_server_of_the_same_revision_alone(tmp_path):
    manager = Manager()
    result = ops(tmp_path, manager, revision='r1').started()
    assert result['changed'] is False and result['ready'] and manager.events == []


def test_started_restarts_on_another_revision_and_records_it(tmp_path):
    manager = Manager()
    result = ops(tmp_path, manager).started()
    assert result['changed'] and result['action'] == 'restart' and manager.events == ['stop', 'start']
    assert (tmp_path / 'revision').read_text() == 'r2\n'


def test_check_mode_reports_the_restart_and_does_nothing(tmp_path):
    manager = Manager()
    result = ops(tmp_path, manager, check_mode=True).started()
    assert result['changed'] and result['action'] == 'restart' and result['pids'] == [100, 101]
    assert manager.events == [] and (tmp_path / 'revision').read_text() == 'r1\n'


def test_a_failed_start_is_stopped_and_keeps_the_old_revision(tmp_path):
    manager = Manager(running=False)
    with pytest.raises(OperationFailed) as info:
        ops(tmp_path, manager, gate_ready=False).started()
    assert info.value.result['cause'] == 'cuda_oom' and info.value.result['msg'] == 'boom'
    assert manager.events == ['start', 'stop'] and not manager.running
    assert info.value.result['cleanup']['stopped_pids'] == [100, 101]
    assert (tmp_path / 'revision').read_text() == 'r1\n'
    # It served nobody: no drain limit of minutes (a warmup stuck for good would hold SGLang's drain).
    assert manager.stop_timeouts == [10]


def test_a_running_but_unready_server_of_the_same_revision_is_waited_for_not_restarted(tmp_path):
    manager = Manager()
    result = ops(tmp_path, manager, ready=False, revision='r1').started()
    assert result['ready'] and result['changed'] is False and manager.events == []


def test_stopped_waits_for_the_gpu_memory_of_its_processes(tmp_path):
    answers = [[{'pid': 101, 'gpu_index': 0, 'used_memory_mib': 2048}, {'pid': 7, 'gpu_index': 1}],
               [{'pid': 7, 'gpu_index': 1}]]
    result = ops(tmp_path, Manager(), gpu=lambda: answers.pop(0)).stopped()
    assert result['changed'] and result['gpu_release'] == {'checked': True, 'holders': []}
    assert answers == []


def test_stopped_names_the_pids_that_keep_gpu_memory(tmp_path):
    holder = [{'pid': 101, 'gpu_index': 3, 'used_memory_mib': 2048}]
    with pytest.raises(OperationFailed) as info:
        ops(tmp_path, Manager(), gpu=lambda: holder).stopped()
    assert 'PID 101 on GPU 3 (2048 MiB)' in info.value.result['msg']
    assert info.value.result['cause'] == 'gpu_not_released'


def test_stopped_on_a_stopped_server_changes_nothing(tmp_path):
    manager = Manager(running=False)
    assert ops(tmp_path, manager, recorded=None).stopped()['changed'] is False and manager.events == []


def test_healthy_fails_on_a_stopped_or_unready_server(tmp_path):
    with pytest.raises(OperationFailed, match='not running'):
        ops(tmp_path, Manager(running=False)).healthy()
    with pytest.raises(OperationFailed, match='not ready: 503'):
        ops(tmp_path, Manager(), ready=False).healthy()
    assert ops(tmp_path, Manager()).healthy()['ready']
    assert not os.path.exists(str(tmp_path / 'progress.json'))


def test_a_revision_read_back_with_its_newline_is_the_same_and_the_file_keeps_its_bytes(tmp_path):
    # The rollback hands back the revision as the snapshot read it, newline and all.
    manager = Manager()
    result = ops(tmp_path, manager, revision='r1\n').started()
    assert result['changed'] is False and manager.events == []
    assert (tmp_path / 'revision').read_bytes() == b'r1\n'


def test_the_run_that_passed_the_gate_is_ready_whatever_its_log_still_holds(tmp_path):
    # After a start the record names the run; later checks of that run count its ready line as seen
    # (a copytruncate rotation took the start marker out of the log), another run's do not.
    manager = Manager(running=False)
    seen = []
    ops(tmp_path, manager, seen=seen).started()
    record = json.loads((tmp_path / 'ready.json').read_text())
    assert record == {'identity': 'inv-2', 'pid': 100, 'revision': 'r2'}
    seen[:] = []
    result = ops(tmp_path, manager, revision='r2', recorded=None, seen=seen,
                 ready=lambda served: served).started()
    assert result['ready'] and result['changed'] is False and seen == [('health', True)] and manager.events == ['start']
    manager.run += 1  # systemd restarted it on its own: a run the gate never passed
    seen[:] = []
    ops(tmp_path, manager, revision='r2', recorded=None, seen=seen, ready=lambda served: served).started()
    assert seen == [('health', False), ('gate', True, False)]


def test_a_stop_forgets_the_revision_so_nothing_brings_the_server_back(tmp_path):
    manager = Manager()
    ops(tmp_path, manager, revision='r1').started()
    assert (tmp_path / 'ready.json').exists()
    result = ops(tmp_path, manager, revision=None, recorded=None, check_mode=True).stopped()
    assert result['changed'] and result['revision_removed'] and (tmp_path / 'revision').exists()
    result = ops(tmp_path, manager, revision=None, recorded=None).stopped()
    assert result['changed'] and result['revision_removed'] and manager.events == ['stop']
    assert not (tmp_path / 'revision').exists() and not (tmp_path / 'ready.json').exists()
    # A crashed server (nothing runs) that is then stopped on purpose: its revision goes too, once.
    (tmp_path / 'revision').write_text('r1\n')
    assert ops(tmp_path, manager, revision=None, recorded=None).stopped()['changed']
    assert not (tmp_path / 'revision').exists()
    assert ops(tmp_path, manager, revision=None, recorded=None).stopped()['changed'] is False


def test_a_server_started_by_hand_is_stopped_inside_the_switch_after_the_units_own(tmp_path):
    manager = Manager()
    events = manager.events

    def stop_hand(timeout):
        events.append('stop hand server (%d s)' % timeout)
        return [7, 8], []
    clock = Clock()
    held = [[{'pid': 8, 'gpu_index': 0}], []]
    operations = Operations(manager, lambda attach, served: GateStub(), lambda served: (False, '503', ProbeStub()),
                            lambda: held.pop(0), str(tmp_path), revision='r2', stop_timeout=45, gpu_release_timeout=5,
                            clock=clock, sleep=clock.sleep, replace=([7], stop_hand))
    result = operations.started()
    assert events == ['stop', 'stop hand server (45 s)', 'start'] and result['replaced'] == [7, 8]
    assert held == []  # its GPU memory was waited for before the start
    check = Operations(Manager(running=False), None, None, lambda: None, str(tmp_path), check_mode=True,
                       replace=([7], stop_hand)).started()
    assert check['replaces'] == [7] and check['action'] == 'start'


def test_a_hand_server_that_survives_fails_the_start_before_it(tmp_path):
    manager = Manager(running=False)
    operations = Operations(manager, lambda attach, served: GateStub(), None, lambda: None, str(tmp_path),
                            replace=([7], lambda timeout: ([7], [7])))
    with pytest.raises(OperationFailed, match='started by hand survived SIGKILL: 7'):
        operations.started()
    assert manager.events == []
