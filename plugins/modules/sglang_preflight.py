#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_preflight
short_description: Check that a host can start SGLang before anything is stopped or started
version_added: 0.1.0
description:
  - Runs the checks to pass before an SGLang server is (re)started and fails with every problem found,
    each one line naming the subject, the bad value and the fix. Nothing is stopped or changed.
  - V(model_path) - an absolute model path exists and the service user can read it. Any other value
    is a Hugging Face hub id, which SGLang downloads; the check is then skipped and says so.
  - V(gpu_count) - O(tp) times O(pp) GPUs are needed; the count is O(gpu_count), or what
    M(inferops.gpu.gpu_info)'s collection finds (NVML or C(nvidia-smi)). A host without GPUs has 0.
  - V(gpu_clean) - on the GPUs the server would use (the first O(tp) x O(pp) by NVML index, all of them
    when it needs as many or more), no foreign compute process runs, and the memory in use beyond
    what the server's own processes hold is at most O(gpu_memory_threshold_mib).
    Skipped with the reason V(no nvidia-smi/NVML) when neither can be used.
  - V(port) - no process other than the server itself listens on O(port) at an address that collides
    with O(host), read from C(/proc/net/tcp), C(/proc/net/tcp6) and the processes' socket descriptors.
    Addresses collide as the kernel decides. The same address collides (an IPv4-mapped IPv6 address counts as IPv4),
    C(0.0.0.0) with any IPv4 address, and C(::) with any address.
  - V(log_dir) - O(log_dir) is a directory on a writable filesystem that O(user) may write into,
    computed from the owner, group and mode of the directory and of every directory above it and from
    the user's groups (not from the access of the user running the module). A missing user or
    directory is a problem naming it.
  - V(release) - O(release), the ml-env current link, resolves to a directory holding the C(.verified)
    marker the ml_env role writes after verification, the same as O(expected_release), and the user
    may read it.
  - The messages name the variables of the inferops.gpu.sglang_server role, which runs this module
    before every (re)start. Used alone, read C(sglang_server_<name>) as the option of that name,
    C(sglang_server_preflight_ignore) as O(ignore), C(sglang_server_preflight_gpu_memory_threshold_mib) as
    O(gpu_memory_threshold_mib), and C(--tp)/C(--pp) in C(sglang_server_args) as O(tp)/O(pp).
options:
  model_path:
    description:
      - The model SGLang loads, as given to C(--model-path). Not given, the V(model_path) check is skipped.
    type: str
  tp:
    description: Tensor parallel size (C(--tp)).
    type: int
    default: 1
  pp:
    description: Pipeline parallel size (C(--pp)).
    type: int
    default: 1
  nnodes:
    description:
      - The nodes of a multi-node launch (C(--nnodes)); each runs O(tp) x O(pp) / O(nnodes) ranks, one GPU each, so
        that many GPUs are needed here.
    type: int
    default: 1
    version_added: 0.1.0
  gpu_count:
    description:
      - Number of GPUs of the host, for example RV(inferops.gpu.gpu_info#module:count) registered earlier.
      - When omitted, the module collects the GPU facts itself. They are collected anyway for the
        V(gpu_clean) check unless it is ignored.
    type: int
  host:
    description:
      - Address the server binds (C(--host)). A name is resolved; an empty value means every interface.
    type: str
    default: 127.0.0.1
  port:
    description: TCP port the server listens on (C(--port)).
    type: int
    default: 30000
  log_dir:
    description:
      - Directory of the server's log file. Not given, only the existence of O(user) is checked.
    type: path
  user:
    description:
      - The service user SGLang runs as.
      - When omitted, the user running this module.
    type: str
  release:
    description:
      - The ml-env current path, for example C(/opt/ml-env) (the ml_env role's C(ml_env_path)), a link to
        the current release directory. Not given, the V(release) check is skipped.
    type: path
  expected_release:
    description:
      - The release directory O(release) must resolve to, for example the C(ml_env_release) fact
        of the ml_env role. A value without C(/) is compared with the name of the resolved directory.
    type: str
  own_pids:
    description:
      - PIDs of the server that is running now, for example the C(pids) that the
        C(inferops.gpu.sglang_server) module returns in check mode.
      - These processes and their descendants are not foreign, so their GPU memory and their hold on O(port) pass.
    type: list
    elements: int
    default: []
  gpu_memory_threshold_mib:
    description:
      - Memory in MiB a GPU may have in use beyond what the server's own processes hold. The driver
        and idle contexts of other tools account for a few hundred MiB.
    type: int
    default: 1024
  ignore:
    description:
      - Checks to skip. Their result is still computed when it is cheap and reported as V(skipped)
        under RV(checks), with the problems they would have found in the reason.
    type: list
    elements: str
    choices: [model_path, gpu_count, gpu_clean, port, log_dir, release]
    default: []
  command_timeout:
    description:
      - Seconds one C(nvidia-smi) call may run before it is killed. A hung call is a problem of the
        V(gpu_clean) check (or V(gpu_count) when V(gpu_clean) is ignored).
    type: int
    default: 30
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.attributes.read_only
requirements:
  - Linux C(/proc). C(nvidia-ml-py) or C(nvidia-smi) for the GPU checks.
notes:
  - Run it as root. Without root the sockets and GPU processes of other users cannot be attributed;
    a port held by an invisible process is still a problem, without a PID.
  - GPU indices are NVML indices (PCI bus order); SGLang uses CUDA ordinals, which are the same on
    hosts of identical GPUs.
  - POSIX ACLs are not read by the V(log_dir) check.
seealso:
  - module: inferops.gpu.gpu_info
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Check the host before starting SGLang with TP 8
  inferops.gpu.sglang_preflight:
    model_path: /srv/models/Qwen3-235B-A22B-FP8
    tp: 8
    port: 30000
    log_dir: /var/log/sglang
    user: sglang
    release: /opt/ml-env
    expected_release: "{{ ml_env_release }}"

- name: Before a restart, the running server's processes and port are its own
  inferops.gpu.sglang_preflight:
    model_path: Qwen/Qwen3-8B
    tp: 2
    gpu_count: "{{ gpu.count }}"
    own_pids: "{{ running.pids }}"
    gpu_memory_threshold_mib: 2048
  register: preflight

- name: A container without GPUs, only the port and the log directory
  inferops.gpu.sglang_preflight:
    port: 30000
    log_dir: /var/log/sglang
    user: sglang
    ignore: [gpu_count, gpu_clean]
"""

RETURN = r"""
problems:
  description: One line per problem found by a check that is not ignored. Empty when all passed.
  returned: always
  type: list
  elements: str
  sample:
    - "GPU 3 is in use by a foreign process: PID 4242 (python train.py) holds 18432 MiB; stop it or free the GPU before starting SGLang"
    - "port 30000 on 127.0.0.1 is held by PID 77 (nginx: master process); free it or set sglang_server_port"
checks:
  description: The outcome of each check, by name.
  returned: always
  type: dict
  sample:
    model_path: {status: skipped, reason: "Qwen/Qwen3-8B is not an absolute path: taken as a Hugging Face hub id, not checked"}
    gpu_count: {status: ok, reason: "tp 2 x pp 1 = 2 GPUs needed, 2 found (gpu_info)"}
    gpu_clean: {status: ok, reason: "GPUs 0, 1: no foreign compute process, at most 1024 MiB in use besides the server"}
    port: {status: ok, reason: "port 30000 on 127.0.0.1 is free"}
    log_dir: {status: ok, reason: "/var/log/sglang is writable by user sglang"}
    release: {status: ok, reason: "/opt/ml-env resolves to the verified release /opt/ml-env.d/releases/3f2a9c1d7e5b"}
  contains:
    model_path: &check
      description: One check.
      type: dict
      contains:
        status:
          description: V(ok), V(failed), or V(skipped) (not applicable, not given, or ignored).
          type: str
          choices: [ok, failed, skipped]
          sample: ok
        reason:
          description: What was found; for V(failed) the problems joined by C( | ).
          type: str
          sample: port 30000 on 127.0.0.1 is free
    gpu_count: *check
    gpu_clean: *check
    port: *check
    log_dir: *check
    release: *check
gpu_processes:
  description:
    - The compute processes on all GPUs, as RV(inferops.gpu.gpu_info#module:processes) reports them,
      with their command line and whether they belong to the server. Empty when no GPU facts were collected.
  returned: always
  type: list
  elements: dict
  sample:
    - gpu_index: 0
      gpu_uuid: GPU-58ba15e6-1c11-a763-4606-42abd72ef835
      pid: 4242
      name: python3
      used_memory_mib: 18432
      cmdline: python train.py
      own: false
  contains:
    gpu_index:
      description: Index of the GPU. V(null) for a GPU not in the facts' list (a MIG instance).
      type: int
      sample: 0
    gpu_uuid:
      description: UUID of the GPU.
      type: str
      sample: GPU-58ba15e6-1c11-a763-4606-42abd72ef835
    pid:
      description: Process id.
      type: int
      sample: 4242
    name:
      description: Process name as the driver reports it.
      type: str
      sample: python3
    used_memory_mib:
      description: GPU memory the process uses in MiB; V(null) when not reported.
      type: int
      sample: 18432
    cmdline:
      description: Command line from C(/proc/<pid>/cmdline); empty when the process is not visible.
      type: str
      sample: python train.py
    own:
      description: Whether the process is one of O(own_pids) or their descendants.
      type: bool
      sample: false
port_holders:
  description: Processes listening on O(port) at an address that collides with O(host).
  returned: always
  type: list
  elements: dict
  sample:
    - pid: 77
      cmdline: "nginx: master process /usr/sbin/nginx"
      address: 0.0.0.0
      own: false
  contains:
    pid:
      description: Process id; V(null) for a socket no visible process holds (another PID namespace, or not root).
      type: int
      sample: 77
    cmdline:
      description: Command line of the process.
      type: str
      sample: "nginx: master process /usr/sbin/nginx"
    address:
      description: Address the socket is bound to.
      type: str
      sample: 0.0.0.0
    own:
      description: Whether the process is one of O(own_pids) or their descendants.
      type: bool
      sample: false
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.facts import collect_gpu_facts
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.preflight import (
    CHECKS,
    failure_message,
    preflight,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model_path=dict(type='str'),
            tp=dict(type='int', default=1),
            pp=dict(type='int', default=1),
            nnodes=dict(type='int', default=1),
            gpu_count=dict(type='int'),
            host=dict(type='str', default='127.0.0.1'),
            port=dict(type='int', default=30000),
            log_dir=dict(type='path'),
            user=dict(type='str'),
            release=dict(type='path'),
            expected_release=dict(type='str'),
            own_pids=dict(type='list', elements='int', default=[]),
            gpu_memory_threshold_mib=dict(type='int', default=1024),
            ignore=dict(type='list', elements='str', choices=list(CHECKS), default=[]),
            command_timeout=dict(type='int', default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for name in ('tp', 'pp', 'nnodes'):
        if params[name] < 1:
            module.fail_json(msg='%s must be at least 1 (got %d)' % (name, params[name]))
    if (params['tp'] * params['pp']) % params['nnodes']:
        module.fail_json(msg='tp x pp (%d x %d) must be divisible by nnodes (%d)' % (params['tp'], params['pp'], params['nnodes']))
    for name in ('gpu_count', 'gpu_memory_threshold_mib'):
        if params[name] is not None and params[name] < 0:
            module.fail_json(msg='%s must not be negative (got %d)' % (name, params[name]))

    run_command = module_runner(module, params['command_timeout'], environ_update={'LC_ALL': 'C'})

    def gpu_facts():
        return collect_gpu_facts(run_command, module.get_bin_path, warn=module.warn)

    result = preflight(params, gpu_facts=gpu_facts)
    if result['problems']:
        module.fail_json(msg=failure_message(result['problems']), changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
