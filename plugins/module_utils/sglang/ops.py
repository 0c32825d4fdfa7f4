# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The states of the sglang_server module: started, restarted, stopped, healthy.

`started` leaves a healthy server of the same revision alone; a different revision (unit, args,
environment or release changed) or a dead server means a (re)start through the health gate. A
start that fails is stopped again, whole tree, so nothing half-started keeps GPU memory.

Two files in run_dir say what serves: `revision`, the revision of the last start that passed the
gate (removed by a stop: a server the operator stopped is not one to bring back), and `ready.json`,
which run of the server passed it (the manager's identity: the unit's InvocationID, or the PID and
its start time). A running server that passed the gate is ready by that record, whatever a rotated
log still holds; the liveness timer reads the same record to count failures from the gate's pass on.
"""

from __future__ import annotations

import json
import os
import time

from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import replace_text
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.launch import LaunchError

# Seconds a start that failed its gate gets to stop before its tree is SIGKILLed. It serves no
# client, and SGLang's drain waits for every request, the warmup's too: one stuck for good (a
# warmup that never ends) would hold the stop for the whole drain limit (stop_timeout).
CLEANUP_STOP_TIMEOUT = 10


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
    """`text` and one newline, replaced in one rename; nothing is written when the file holds that already."""
    data = text + '\n'
    try:
        with open(path) as handle:
            if handle.read() == data:
                return False
    except (IOError, OSError):
        pass
    replace_text(path, data, 0o644)
    return True


def remove(path):
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def read_ready(path):
    """The record of the run that last passed the gate ({} when none or unreadable)."""
    try:
        with open(path) as handle:
            record = json.load(handle)
    except (IOError, OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


class Operations:
    """manager: sglang_launch manager; gate(attach, served) -> Gate; health(served) -> (ready, reason, probe),
    where served says that this run of the server passed the gate before (ready.json);
    gpu_processes() -> [{'pid', 'gpu_index', 'used_memory_mib'}] or None when no GPU can be queried."""

    def __init__(self, manager, gate, health, gpu_processes, run_dir, check_mode=False, revision=None,
                 stop_timeout=60, gpu_release_timeout=60, clock=time.monotonic, sleep=time.sleep, replace=None):
        self.manager = manager
        self.gate = gate
        self.health = health
        self.gpu_processes = gpu_processes
        self.revision_path = os.path.join(run_dir, 'revision')
        self.ready_path = os.path.join(run_dir, 'ready.json')
        self.check_mode = check_mode
        # A revision read back from a file may end in its newline: the same revision all the same.
        self.revision = revision.strip() if revision is not None else None
        self.stop_timeout = stop_timeout
        self.gpu_release_timeout = gpu_release_timeout
        self.clock = clock
        self.sleep = sleep
        # replace: (pids, stop(timeout) -> (stopped, survivors)) of the servers started by hand that this start takes
        # over (foreign.stop), or None.
        self.replace = replace

    # -- states ---------------------------------------------------------------------------------
    def started(self):
        main = self.manager.main_pid()
        recorded = read_text(self.revision_path)
        if main and (self.revision is None or recorded == self.revision):
            served = self._served()
            ready, reason, probe = self.health(served)
            if ready:
                self._record_ready()
                return self._healthy_result(probe, action='none', changed=False)
            if self.check_mode:
                return dict(changed=False, action='none', ready=False, reason=reason, pids=self.manager.pids())
            # Running but not serving yet (a boot-time start still loading): wait for it, do not restart it.
            return self._gated(attach=True, action='none', changed=False, served=served)
        return self._start(action='restart' if main else 'start', recorded=recorded)

    def restarted(self):
        main = self.manager.main_pid()
        return self._start(action='restart' if main else 'start', recorded=read_text(self.revision_path))

    def stopped(self):
        """Stop the server and forget its revision: a rollback must not start what the operator stopped."""
        pids = self.manager.pids()
        recorded = os.path.exists(self.revision_path)
        if not pids:
            if not self.check_mode:
                remove(self.revision_path)
                remove(self.ready_path)
            return dict(changed=recorded, action='none', ready=False, pids=[], revision_removed=recorded)
        if self.check_mode:
            return dict(changed=True, action='stop', ready=False, pids=pids, revision_removed=recorded)
        result = self._stop()
        remove(self.revision_path)
        remove(self.ready_path)
        result.update(changed=True, action='stop', ready=False, revision_removed=recorded)
        return result

    def healthy(self):
        if not self.manager.main_pid():
            raise OperationFailed('the server is not running', ready=False, cause='not_running', phase='stopped',
                                  pids=self.manager.pids())
        ready, reason, probe = self.health(self._served())
        if not ready:
            raise OperationFailed('the server runs but is not ready: %s' % reason, ready=False, cause='not_ready',
                                  pids=self.manager.pids())
        return self._healthy_result(probe, action='none', changed=False)

    # -- steps ----------------------------------------------------------------------------------
    def _start(self, action, recorded):
        pids = self.manager.pids()
        if self.check_mode:
            return dict(changed=True, action=action, ready=False, pids=pids, replaces=self.replace[0] if self.replace else [],
                        revision_before=recorded, revision=self.revision)
        stop = self._stop() if pids else {}
        # A server started by hand (inferops_adopt) ends here, inside the switch: it served until now.
        replaced = self._stop_replaced() if self.replace else []
        try:
            result = self._gated(attach=False, action=action, changed=True)
        except OperationFailed as exc:
            exc.result['cleanup'] = self._cleanup()
            raise
        result.update(stopped_before=stop.get('stopped_pids', []), replaced=replaced)
        if self.revision is not None:
            write_text(self.revision_path, self.revision)
        return result

    def _served(self):
        """Whether the run of the server now is the one that last passed the gate."""
        identity = self.manager.identity()
        return bool(identity) and read_ready(self.ready_path).get('identity') == identity

    def _record_ready(self):
        """Name the run that passed the gate (after every pass: a boot-time start has no record yet)."""
        if self.check_mode:
            return
        identity = self.manager.identity()
        if not identity:
            return
        record = json.dumps({'identity': identity, 'pid': self.manager.main_pid(), 'revision': self.revision},
                            sort_keys=True)
        write_text(self.ready_path, record)

    def _gated(self, attach, action, changed, served=False):
        gate = self.gate(attach, served)
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
        self._record_ready()
        result['changed'] = changed
        return result

    def _cleanup(self):
        try:
            stop = self._stop(min(self.stop_timeout, CLEANUP_STOP_TIMEOUT))
        except OperationFailed as exc:
            return {'failed': exc.result['msg']}
        return {'stopped_pids': stop['stopped_pids'], 'gpu_release': stop['gpu_release']}

    def _stop(self, timeout=None):
        try:
            stopped, survivors = self.manager.stop(self.stop_timeout if timeout is None else timeout)
        except LaunchError as exc:
            raise OperationFailed(str(exc), cause='stop')
        if survivors:
            raise OperationFailed('processes of the server survived SIGKILL: %s' % ', '.join(map(str, survivors)),
                                  cause='stop', pids=survivors)
        return {'stopped_pids': stopped, 'gpu_release': self._wait_gpu_release(stopped)}

    def _stop_replaced(self):
        stopped, survivors = self.replace[1](self.stop_timeout)
        if survivors:
            raise OperationFailed('processes of the server started by hand survived SIGKILL: %s'
                                  % ', '.join(map(str, survivors)), cause='stop', pids=survivors)
        self._wait_gpu_release(stopped)
        return stopped

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
