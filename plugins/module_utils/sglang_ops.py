# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The states of the sglang_server module: started, restarted, stopped, healthy.

`started` leaves a healthy server of the same revision alone; a different revision (unit, args,
environment or release changed) or a dead server means a (re)start through the health gate. A
start that fails is stopped again, whole tree, so nothing half-started keeps GPU memory.
"""

from __future__ import annotations

import os
import time

from ansible_collections.inferops.gpu.plugins.module_utils.sglang_launch import LaunchError


class OperationFailed(Exception):
    def __init__(self, msg, **result):
        self.result = result
        self.result['msg'] = msg
        super(OperationFailed, self).__init__(msg)


def read_text(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def write_text(path, text):
    tmp = '%s.tmp' % path
    with open(tmp, 'w') as handle:
        handle.write(text + '\n')
    os.rename(tmp, path)


class Operations:
    """manager: sglang_launch manager; gate(attach) -> Gate; health() -> (ready, reason, probe);
    gpu_processes() -> [{'pid', 'gpu_index', 'used_memory_mib'}] or None when no GPU can be queried."""

    def __init__(self, manager, gate, health, gpu_processes, run_dir, check_mode=False, revision=None,
                 stop_timeout=60, gpu_release_timeout=60, clock=time.monotonic, sleep=time.sleep):
        self.manager = manager
        self.gate = gate
        self.health = health
        self.gpu_processes = gpu_processes
        self.revision_path = os.path.join(run_dir, 'revision')
        self.check_mode = check_mode
        self.revision = revision
        self.stop_timeout = stop_timeout
        self.gpu_release_timeout = gpu_release_timeout
        self.clock = clock
        self.sleep = sleep

    # -- states ---------------------------------------------------------------------------------
    def started(self):
        main = self.manager.main_pid()
        recorded = read_text(self.revision_path)
        if main and (self.revision is None or recorded == self.revision):
            ready, reason, probe = self.health()
            if ready:
                return self._healthy_result(probe, action='none', changed=False)
            if self.check_mode:
                return dict(changed=False, action='none', ready=False, reason=reason, pids=self.manager.pids())
            # Running but not serving yet (a boot-time start still loading): wait for it, do not restart it.
            return self._gated(attach=True, action='none', changed=False)
        return self._start(action='restart' if main else 'start', recorded=recorded)

    def restarted(self):
        main = self.manager.main_pid()
        return self._start(action='restart' if main else 'start', recorded=read_text(self.revision_path))

    def stopped(self):
        pids = self.manager.pids()
        if not pids:
            return dict(changed=False, action='none', ready=False, pids=[])
        if self.check_mode:
            return dict(changed=True, action='stop', ready=False, pids=pids)
        result = self._stop()
        result.update(changed=True, action='stop', ready=False)
        return result

    def healthy(self):
        if not self.manager.main_pid():
            raise OperationFailed('the server is not running', ready=False, cause='not_running', phase='stopped',
                                  pids=self.manager.pids())
        ready, reason, probe = self.health()
        if not ready:
            raise OperationFailed('the server runs but is not ready: %s' % reason, ready=False, cause='not_ready',
                                  pids=self.manager.pids())
        return self._healthy_result(probe, action='none', changed=False)

    # -- steps ----------------------------------------------------------------------------------
    def _start(self, action, recorded):
        pids = self.manager.pids()
        if self.check_mode:
            return dict(changed=True, action=action, ready=False, pids=pids,
                        revision_before=recorded, revision=self.revision)
        stop = self._stop() if pids else {}
        try:
            result = self._gated(attach=False, action=action, changed=True)
        except OperationFailed as exc:
            exc.result['cleanup'] = self._cleanup()
            raise
        result.update(stopped_before=stop.get('stopped_pids', []))
        if self.revision is not None:
            write_text(self.revision_path, self.revision)
        return result

    def _gated(self, attach, action, changed):
        gate = self.gate(attach)
        if not attach:
            try:
                self.manager.start()
            except LaunchError as exc:
                raise OperationFailed(str(exc), ready=False, cause='launch', action=action, phase='starting',
                                      log_tail=list(gate.log.tail))
        result = gate.run()
        result.update(action=action, pids=self.manager.pids())
        if not result['ready']:
            raise OperationFailed(result.pop('msg'), **result)
        result['changed'] = changed
        return result

    def _cleanup(self):
        try:
            stop = self._stop()
        except OperationFailed as exc:
            return {'failed': exc.result['msg']}
        return {'stopped_pids': stop['stopped_pids'], 'gpu_release': stop['gpu_release']}

    def _stop(self):
        try:
            stopped, survivors = self.manager.stop(self.stop_timeout)
        except LaunchError as exc:
            raise OperationFailed(str(exc), cause='stop')
        if survivors:
            raise OperationFailed('processes of the server survived SIGKILL: %s' % ', '.join(map(str, survivors)),
                                  cause='stop', pids=survivors)
        return {'stopped_pids': stopped, 'gpu_release': self._wait_gpu_release(stopped)}

    def _wait_gpu_release(self, pids):
        """Wait until no stopped PID holds GPU memory; orphaned ranks keep it after a crash."""
        wanted = set(pids)
        end = self.clock() + self.gpu_release_timeout
        while True:
            procs = self.gpu_processes()
            if procs is None:
                return {'checked': False, 'holders': []}
            holders = [p for p in procs if p.get('pid') in wanted]
            if not holders:
                return {'checked': True, 'holders': []}
            if self.clock() >= end:
                named = ', '.join('PID %s on GPU %s (%s MiB)' % (p['pid'], p.get('gpu_index'), p.get('used_memory_mib'))
                                  for p in holders)
                raise OperationFailed('GPU memory still held %d s after the server stopped: %s'
                                      % (self.gpu_release_timeout, named), cause='gpu_not_released',
                                      pids=sorted(set(p['pid'] for p in holders)))
            self.sleep(0.5)

    def _healthy_result(self, probe, action, changed):
        return dict(changed=changed, action=action, ready=True, phase='ready', pids=self.manager.pids(),
                    sample=probe.sample, served_model_name=probe.served_model_name, model_info=probe.model_info)
