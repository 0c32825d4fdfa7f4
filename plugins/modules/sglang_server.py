#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_server
short_description: Start, health-gate and stop an SGLang server, failing fast with the cause
version_added: 0.1.0
description:
  - Starts an SGLang server (a systemd unit, or a command line in its own process group) and watches it
    until it really serves, or fails the moment it cannot, naming the cause and the fix.
  - Ready means the readiness contract of SGLang 0.5.9 holds, not an open port. C(/health_generate)
    answers 200, the log has C(The server is fired up and ready to roll!) (unless O(skip_warmup)), an own
    C(POST /generate) returns at least one completion token, and C(/v1/models) names
    O(served_model_name) when that is given.
  - For a server already running, the ready line counts as seen when this run of it passed the gate before
    (C(ready.json)), or when the log holds no start of it at all (rotated since). So its readiness never hangs on
    what a rotated log still holds; C(/health_generate) answers 503 until the warmup passed.
  - Every poll looks at the process (or the unit's main PID) and the new log lines. An exit, or a known
    fatal log line while the process still lives, fails at once with the matched cause, the fix and the
    last log lines (ANSI codes stripped, secrets masked). No new log line for O(stall_timeout) seconds
    before the port opens (a hung NCCL init prints nothing) fails too. O(timeout) bounds everything else.
  - A start that fails is stopped again (whole process tree or the unit's cgroup), so nothing keeps GPU memory.
  - While it runs the module keeps a progress file (RV(progress_path)) with the phase reached and the last
    log line, for callers that run it with C(async) and show progress.
options:
  state:
    description:
      - V(started) starts the server when it is not running, or when O(revision) differs from the revision
        recorded at the last successful start, and waits until it is ready. A ready server of the same
        revision is left alone (no change).
      - V(restarted) always stops and starts it again through the health gate.
      - V(stopped) stops the whole server, then waits until the GPU memory its processes held is free, and removes
        the recorded revision, so a rollback or a later V(started) with the old revision does not count it as serving.
      - V(healthy) only checks a running server against the readiness contract and fails when it does not hold.
    type: str
    choices: [started, stopped, restarted, healthy]
    default: started
  manager:
    description:
      - V(systemd) controls O(unit), which must exist. V(process) runs O(command) in a new session with a
        pidfile in O(run_dir) and the output appended to O(log_path).
    type: str
    choices: [systemd, process]
    default: systemd
  unit:
    description: The systemd unit of the server (O(manager=systemd)).
    type: str
    default: sglang-server.service
  command:
    description:
      - The command line of the server (O(manager=process)), for example
        C([/opt/ml-env/bin/python, -m, sglang.launch_server, --model-path, /models/m]).
      - Required when O(manager=process) and O(state) is V(started) or V(restarted).
    type: list
    elements: str
  environment:
    description:
      - Variables added to the environment of O(command) (O(manager=process)), like a unit's C(Environment=).
      - Put secrets in a file of O(environment_files) instead; module arguments show in verbose output.
    type: dict
    default: {}
  environment_files:
    description:
      - Files of C(NAME=value) lines (systemd C(EnvironmentFile=) syntax, values optionally double-quoted) read into
        the environment of O(command) (O(manager=process)), in order, after O(environment); later files win, as in a unit.
      - A missing file fails the start.
    type: list
    elements: path
    default: []
  chdir:
    description: Working directory of O(command) (O(manager=process)).
    type: path
  log_path:
    description:
      - The log the server writes (its stdout and stderr). With O(manager=systemd) the unit appends to
        this file (C(StandardOutput=append:)); with O(manager=process) the module does.
    type: path
    required: true
  run_dir:
    description:
      - Directory of the module's own files, C(progress.json), C(revision) (the revision of the last start that
        passed the gate; removed by a stop), C(ready.json) (which run of the server passed it, by the unit's
        InvocationID or the PID and its start time; the liveness timer reads it) and, for O(manager=process),
        C(sglang-server.pid). Created (0750) when missing. Defaults to the directory of O(log_path).
    type: path
  host:
    description: Address the server listens on (its C(--host)); a wildcard is probed on loopback.
    type: str
    default: 127.0.0.1
  port:
    description: Port the server listens on (its C(--port)).
    type: int
    default: 30000
  api_key:
    description: The server's API key (C(--api-key)), sent as a bearer token. Never logged.
    type: str
  served_model_name:
    description: When set, C(/v1/models) must name this model (C(--served-model-name)).
    type: str
  skip_warmup:
    description: The server runs with C(--skip-server-warmup), so it never logs the ready line.
    type: bool
    default: false
  ready_line:
    description:
      - The server's log level prints INFO lines (C(--log-level) info or debug, SGLang's default), so its log has
        the ready line, which the gate then waits for. V(false) with C(--log-level warning) or above, which hides
        it. Then C(/health_generate)'s 200, which SGLang answers only after its warmup passed, decides.
    type: bool
    default: true
  probe:
    description:
      - Probe the full readiness contract (rank 0). Set V(false) on the followers (C(--node-rank) 1 or more) of a
        multi-node launch. Real SGLang runs no warmup and no HTTP server there and never logs the ready line; once
        its schedulers are ready it starts a dummy health server that answers 200 on C(/health), and blocks. Such
        a node is ready when that server answers; its process and log are still watched for failures.
    type: bool
    default: true
  settings_from_unit:
    description:
      - A unit file (O(manager=systemd)) whose C(ExecStart=) gives O(host), O(port), O(served_model_name),
        O(skip_warmup), O(ready_line) (C(--log-level)) and O(probe) (C(--node-rank) 0), and whose C(--config) file gives O(api_key); they replace
        those options. A roll's rollback probes the server its restored files describe, not the failed new input.
      - An unreadable unit or config file fails before anything changes. Not read with O(state=stopped).
    type: path
  revision:
    description:
      - An opaque digest of everything the server runs with (unit, arguments, environment, ml-env release).
        Recorded after a successful start; with O(state=started) a running server of another revision is restarted.
    type: str
  timeout:
    description:
      - Seconds a start may take in total, to ready. SGLang's own CI allows 3000 s for Blackwell hosts.
    type: int
    default: 3000
  stall_timeout:
    description:
      - Seconds without a new log line, before the port opens, after which the start fails as stalled.
    type: int
    default: 600
  poll_interval:
    description: Seconds between two looks at the process and the log.
    type: float
    default: 0.2
  health_timeout:
    description:
      - Client timeout of C(/health_generate) in seconds. SGLang answers it after a one-token generation that
        may take up to about 21 s, so keep it at 25 or more.
    type: float
    default: 25
  generate_max_tokens:
    description: Tokens the readiness C(POST /generate) asks for (temperature 0).
    type: int
    default: 8
  stop_timeout:
    description: Seconds between SIGTERM and SIGKILL when stopping (O(manager=process); the unit has its own).
    type: int
    default: 60
  gpu_release_timeout:
    description: Seconds to wait after a stop until no stopped process holds GPU memory.
    type: int
    default: 60
  command_timeout:
    description: Seconds one C(systemctl) or C(nvidia-smi) call may run before it is killed.
    type: int
    default: 30
  log_tail_lines:
    description: Log lines returned in RV(log_tail) and shown on failure.
    type: int
    default: 30
  replace:
    description:
      - SGLang servers started by hand that a (re)start takes over (M(inferops.gpu.sglang_foreign)'s RV(inferops.gpu.sglang_foreign#module:servers),
        with C(inferops_adopt)). Each is stopped right before the start, after the unit's own server, as a unit's stop
        would (SIGTERM to its main process, whose drain ends its ranks; SIGKILL to its tree after O(stop_timeout)),
        and its GPU memory must be released; a PID whose start time differs is another process and is left alone.
      - Not used by a stop, or when the server runs its revision and serves.
    type: list
    elements: dict
    default: []
    suboptions:
      pid:
        description: The server's main PID.
        type: int
        required: true
      start:
        description: Its start time (clock ticks after boot, C(/proc/PID/stat) field 22).
        type: int
        required: true
attributes:
  check_mode:
    support: full
    details: Reports the action (V(start), V(restart), V(stop) or V(none)) and the server's PIDs, starting nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
notes:
  - The module blocks until the server is ready or failed. Run it with C(async) and poll RV(progress_path)
    to show progress during a long start (the P(inferops.gpu.sglang_server#role) role does).
  - Free GPU memory is checked with NVML or C(nvidia-smi); without either (no GPU) that check is skipped.
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Start the unit and wait until it generates
  inferops.gpu.sglang_server:
    state: started
    unit: sglang-server.service
    log_path: /var/log/sglang/server.log
    served_model_name: kimi-k2.5
    api_key: "{{ vault_sglang_api_key }}"
    revision: "{{ server_revision }}"

- name: Run a server from a command line, as its own process group
  inferops.gpu.sglang_server:
    manager: process
    command: [/opt/ml-env/bin/python, -m, sglang.launch_server, --model-path, /models/qwen, --tp, "2"]
    environment:
      SGLANG_DISABLE_CUDNN_CHECK: "1"
    log_path: /var/log/sglang/qwen.log
    port: 30000
    stall_timeout: 300

- name: Is it serving?
  inferops.gpu.sglang_server:
    state: healthy
    log_path: /var/log/sglang/server.log
  register: health

- name: Stop it and wait for the GPUs to be free
  inferops.gpu.sglang_server:
    state: stopped
    log_path: /var/log/sglang/server.log
"""

RETURN = r"""
ready:
  description: Whether the readiness contract held when the module returned.
  returned: always
  type: bool
  sample: true
action:
  description: What was done (or, in check mode, would be done).
  returned: always
  type: str
  choices: [none, start, restart, stop]
  sample: start
phase:
  description: The phase a start reached, C(starting), C(process_up), C(loading), C(port_open), C(warmup) or C(ready).
  returned: when a start was watched, or ready
  type: str
  sample: ready
startup_seconds:
  description: Seconds from the start to ready (or to the failure).
  returned: when a start was watched
  type: float
  sample: 212.4
port_open_seconds:
  description: Seconds from the start until the HTTP port accepted connections; null when it never did.
  returned: when a start was watched
  type: float
  sample: 188.9
served_model_name:
  description: The model id C(/v1/models) reports.
  returned: when ready
  type: str
  sample: kimi-k2.5
model_info:
  description: The JSON of C(/model_info) (C(model_path), C(is_generation), ...).
  returned: when ready
  type: dict
sample:
  description: The readiness generation, C(prompt), C(text) (first 200 characters) and C(completion_tokens).
  returned: when ready
  type: dict
  sample: {prompt: The capital of France is, text: " Paris.", completion_tokens: 8}
pids:
  description: PIDs of the server's processes (main process and ranks).
  returned: always
  type: list
  elements: int
log_path:
  description: The server's log.
  returned: always
  type: str
progress_path:
  description: The progress file, JSON with C(state), C(phase), C(elapsed), C(last_line), C(updated).
  returned: always
  type: str
cause:
  description:
    - On failure, the matched cause, for example C(cudnn_guard), C(abi_mismatch), C(kv_pool_oom),
      C(cuda_oom), C(nccl), C(port_in_use), C(rank_crash), C(stalled), C(timeout), or C(unknown).
  returned: on failure
  type: str
  sample: cudnn_guard
fix:
  description: On failure, what to do about the cause.
  returned: on failure
  type: str
log_tail:
  description: The last log lines of this start, ANSI codes stripped and secrets masked.
  returned: when a start was watched
  type: list
  elements: str
cleanup:
  description: After a failed start, the PIDs stopped and whether their GPU memory was released.
  returned: on a failed start
  type: dict
stopped_before:
  description: PIDs of the server a (re)start stopped first.
  returned: after a start
  type: list
  elements: int
replaced:
  description: PIDs of the servers started by hand (O(replace)) a start stopped first.
  returned: after a start
  type: list
  elements: int
replaces:
  description: The main PIDs of O(replace) a (re)start would stop.
  returned: in check mode, when a (re)start would happen
  type: list
  elements: int
stopped_pids:
  description: PIDs a stop ended (main process and ranks).
  returned: after a stop
  type: list
  elements: int
gpu_release:
  description:
    - After a stop, C(checked) (false without NVML or nvidia-smi) and C(holders), the stopped processes still holding
      GPU memory (always empty on success).
  returned: after a stop
  type: dict
reason:
  description: Why a running server is not ready.
  returned: in check mode, when the server runs but is not ready
  type: str
revision:
  description: The revision a (re)start would record.
  returned: in check mode, when a (re)start would happen
  type: str
revision_removed:
  description: With O(state=stopped), whether a recorded revision was (or, in check mode, would be) removed.
  returned: with O(state=stopped)
  type: bool
revision_before:
  description: The revision recorded at the last successful start.
  returned: in check mode, when a (re)start would happen
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.launch import LaunchError
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.server_module import build_operations
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.ops import OperationFailed
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.unit_settings import SettingsError, read_settings


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', default='started', choices=['started', 'stopped', 'restarted', 'healthy']),
            manager=dict(type='str', default='systemd', choices=['systemd', 'process']),
            unit=dict(type='str', default='sglang-server.service'),
            command=dict(type='list', elements='str'),
            environment=dict(type='dict', default={}),
            environment_files=dict(type='list', elements='path', default=[]),
            chdir=dict(type='path'),
            log_path=dict(type='path', required=True),
            run_dir=dict(type='path'),
            host=dict(type='str', default='127.0.0.1'),
            port=dict(type='int', default=30000),
            api_key=dict(type='str', no_log=True),
            served_model_name=dict(type='str'),
            skip_warmup=dict(type='bool', default=False),
            ready_line=dict(type='bool', default=True),
            probe=dict(type='bool', default=True),
            revision=dict(type='str'),
            settings_from_unit=dict(type='path'),
            timeout=dict(type='int', default=3000),
            stall_timeout=dict(type='int', default=600),
            poll_interval=dict(type='float', default=0.2),
            health_timeout=dict(type='float', default=25),
            generate_max_tokens=dict(type='int', default=8, no_log=False),
            stop_timeout=dict(type='int', default=60),
            gpu_release_timeout=dict(type='int', default=60),
            command_timeout=dict(type='int', default=30),
            log_tail_lines=dict(type='int', default=30),
            replace=dict(type='list', elements='dict', default=[],
                         options=dict(pid=dict(type='int', required=True), start=dict(type='int', required=True))),
        ),
        supports_check_mode=True,
    )
    params = module.params
    problems = [
        '%s must be at least %s (got %s)' % (name, low, params[name])
        for name, low in (('timeout', 1), ('stall_timeout', 1), ('poll_interval', 0.01), ('health_timeout', 1),
                          ('generate_max_tokens', 1), ('stop_timeout', 1), ('gpu_release_timeout', 0),
                          ('log_tail_lines', 1), ('port', 1))
        if params[name] < low
    ]
    if params['port'] > 65535:
        problems.append('port must be at most 65535 (got %s)' % params['port'])
    if params['manager'] == 'process' and params['state'] in ('started', 'restarted') and not params['command']:
        problems.append('command is required to start a server with manager=process')
    if params['settings_from_unit'] and params['manager'] != 'systemd':
        problems.append('settings_from_unit needs manager=systemd (the process manager has no unit)')
    if problems:
        module.fail_json(msg='; '.join(problems))
    if params['settings_from_unit'] and params['state'] != 'stopped':
        try:
            params.update(read_settings(params['settings_from_unit']))
        except SettingsError as exc:
            module.fail_json(msg='settings_from_unit: %s' % exc, ready=False, cause='settings')
        if params['api_key']:
            module.no_log_values.add(params['api_key'])

    params['run_dir'] = params['run_dir'] or os.path.dirname(params['log_path'])
    run = module_runner(module, params['command_timeout'])
    ops, paths = build_operations(module, params, run)
    try:
        result = getattr(ops, params['state'])()
    except OperationFailed as exc:
        exc.result.update(paths)
        exc.result.setdefault('ready', False)
        module.fail_json(**exc.result)
    except (LaunchError, CommandTimeout) as exc:
        module.fail_json(msg=str(exc), ready=False, cause='launch', **paths)
    result.update(paths)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
