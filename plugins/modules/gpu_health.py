#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_health
short_description: Tell whether a GPU node is fit to serve, in seconds, before a long launch
version_added: 0.1.0
description:
  - Runs the checks chosen in O(checks). Each reports C(ok), C(warn), C(fail) or C(skipped), the measured value
    and a fix hint. The task fails when a check listed in O(require) reports C(fail).
  - V(driver) - an NVIDIA driver answers, its CUDA version is at least O(toolkit_version) (major.minor),
    and its version is at least O(min_driver_version) (CUDA 13 needs a 580 or newer driver).
  - V(gpus) - at least O(expected_gpus) GPUs, each with a compute capability in O(compute_capabilities); no
    pending or failed row remap, no pending retired page, no volatile uncorrectable ECC error and no hardware
    slowdown (C(fail)); persistence mode off or a clock event other than idle (C(warn)). Read from C(nvidia-smi -q).
  - V(xid) - the driver's Xid events (C(NVRM) lines) of this boot from C(journalctl -k -b), or C(dmesg) without a
    journal, grouped by code with the meaning of the common ones. Codes that need a GPU reset or a drain
    (48, 64, 74, 79, 95, 119) fail, the others warn.
  - V(pcie) - the PCIe link width of each GPU against its maximum (a narrower link fails, a reseat or a bad slot);
    the generation too when the GPU is busy (an idle link trains down by design); Access Control Services on every
    bridge above a GPU (from C(lspci -vvv), or from the config space without pciutils) and the IOMMU mode, the known
    causes of blocked peer-to-peer (C(warn)).
  - V(p2p) - every pair of GPUs can read each other (C(nvidia-smi topo -p2p r)).
  - V(gpu_clean) - no foreign compute process on the GPUs of O(gpu_indices), each named with PID, user and command
    line, and at most O(gpu_memory_threshold_mib) MiB in use that no process of the server's own holds. The server's
    own processes are found as the sglang_server role runs the server, the processes of the units of O(own_units)
    (their control groups) and the process groups the pid files of O(own_pid_files) record, and those of
    O(own_pids); the check's value lists them (C(own), each with what made it the server's, C(by)) and its summary
    says how many there are and what they hold. A foreign process is still a failure.
  - V(nccl) - opt-in. An all-reduce over O(nccl_gpus) GPUs, one process each, started with O(ml_env_python) so the
    runtime_env start-up hook applies. The sum is checked, the bus bandwidth measured at O(nccl_size_mib) MiB. A run
    that passes O(nccl_timeout) is killed with every rank and reported as no progress, the known symptom of blocked
    peer-to-peer, with the last NCCL lines. Every report names the NCCL release the ranks loaded (RV(nccl_version)).
  - Never changes the host; check mode runs the same checks.
options:
  checks:
    description: The checks to run. V(nccl) takes the GPUs for a few seconds and needs O(ml_env_python).
    type: list
    elements: str
    choices: [driver, gpus, xid, pcie, p2p, gpu_clean, nccl]
    default: [driver, gpus, xid, pcie, p2p, gpu_clean]
  require:
    description:
      - The checks whose C(fail) fails the task. The others' failures are only reported, in RV(advisories).
      - V([]) reports without ever failing.
    type: list
    elements: str
    choices: [driver, gpus, xid, pcie, p2p, gpu_clean, nccl]
    default: [driver, gpus, xid, pcie, p2p, gpu_clean, nccl]
  expected_gpus:
    description: The least number of GPUs the node must have. V(0) accepts a node without GPUs.
    type: int
    default: 0
  compute_capabilities:
    description: Compute capabilities allowed, as C(nvidia-smi) writes them (V(12.0) for sm_120). Empty allows any.
    type: list
    elements: str
    default: []
  toolkit_version:
    description:
      - The CUDA toolkit the node runs (major.minor, for example V(13.0)), the driver's CUDA version must be at least
        this. Empty skips the comparison.
    type: str
    default: ''
  min_driver_version:
    description: The least driver version the toolkit needs, for example V(580.65.06) for CUDA 13.0. Empty skips it.
    type: str
    default: ''
  gpu_indices:
    description: The GPUs (NVML indices) the V(gpu_clean) check looks at. Empty means all of them.
    type: list
    elements: int
    default: []
  gpu_memory_threshold_mib:
    description: GPU memory in MiB that may be in use on a clean GPU besides what O(own_pids) hold.
    type: int
    default: 1024
  own_pids:
    description: Processes (and their descendants) that are not foreign to the GPUs, for example the running server's.
    type: list
    elements: int
    default: []
  own_units:
    description:
      - systemd units whose processes are not foreign to the GPUs, the server run as a unit (the sglang_server role's
        C(<sglang_server_unit_name>.service)). Every process of the unit's control group counts (C(systemctl show
        --property=ControlGroup), then its C(cgroup.procs) under C(/sys/fs/cgroup)), or the main PID and its
        descendants where the control group cannot be read.
      - A unit that does not exist or does not run names no process. One that cannot be looked up (no systemd) is
        named in the problem of every foreign process, which may be the server's.
    type: list
    elements: str
    default: []
  own_pid_files:
    description:
      - Pid files of servers run as a process group (the sglang_server module's process manager writes C(PID
        STARTTIME) to C(<run_dir>/sglang-server.pid)). The group of that PID and the PID's descendants are not foreign
        to the GPUs; a PID that now runs another program (another start time) names none.
      - A missing file names no process.
    type: list
    elements: path
    default: []
  ml_env_python:
    description: The python of the ml-env release (RV(inferops.gpu.ml_env_check#module:python)); needed by V(nccl).
    type: path
  nccl_gpus:
    description: How many GPUs the NCCL smoke test spans. Not given, every GPU of the node.
    type: int
  nccl_timeout:
    description: Seconds the NCCL smoke test may take in all before every rank is killed and the test fails.
    type: int
    default: 60
  nccl_size_mib:
    description: Message size of the bandwidth measurement, in MiB.
    type: int
    default: 64
  nccl_iters:
    description: All-reduce iterations timed for the bandwidth.
    type: int
    default: 20
  nvidia_smi_path:
    description: Path of C(nvidia-smi). Not set, it is looked up in E(PATH) and the usual system directories.
    type: path
  command_timeout:
    description:
      - Seconds one command (C(nvidia-smi), C(journalctl), C(dmesg), C(lspci)) may run before it is killed.
        A hung C(nvidia-smi) is the usual sign of a GPU that fell off the bus.
    type: int
    default: 30
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.attributes.read_only
requirements:
  - C(nvidia-smi) from the NVIDIA driver; C(lspci) (pciutils) optional; root to read the kernel log and the config space.
  - For V(nccl), an ml-env with torch built for the node's CUDA.
seealso:
  - module: inferops.gpu.gpu_info
  - module: inferops.gpu.sglang_preflight
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Refuse a node that is not fit to serve
  inferops.gpu.gpu_health:
    expected_gpus: 8
    compute_capabilities: ['12.0']
    toolkit_version: "13.0"
    min_driver_version: 580.65.06

- name: Add the NCCL smoke test, fatal, and only report Xid events
  inferops.gpu.gpu_health:
    checks: [driver, gpus, xid, pcie, p2p, gpu_clean, nccl]
    require: [driver, gpus, p2p, gpu_clean, nccl]
    ml_env_python: /opt/ml-env/current/bin/python
    nccl_timeout: 60
  register: health

- name: Show the all-reduce bandwidth and the NCCL that ran it
  ansible.builtin.debug:
    msg: "{{ health.checks.nccl.value.busbw_gbps }} GB/s in {{ health.checks.nccl.value.seconds }} s with NCCL {{ health.nccl_version }}"
"""

RETURN = r"""
healthy:
  description: No check of O(require) failed.
  returned: always
  type: bool
  sample: true
problems:
  description: One line per failure of a required check, naming the check, the subject, the value and the fix.
  returned: always
  type: list
  elements: str
  sample: ["p2p: GPU 0 -> GPU 4: NS (peer-to-peer blocked: ACS/IOMMU ...)"]
advisories:
  description:
    - Warnings, and failures of checks that are not required, one line each, in the form of RV(problems).
    - Not called C(warnings), which Ansible takes for its own display.
  returned: always
  type: list
  elements: str
count:
  description: Number of GPUs found (V(0) without a driver).
  returned: always
  type: int
  sample: 8
driver_version:
  description: The driver's version, empty without a driver.
  returned: always
  type: str
  sample: 580.159.04
nccl_version:
  description:
    - The NCCL release the V(nccl) check's ranks ran with (C(torch.cuda.nccl.version()) in O(ml_env_python)), also
      in the check's C(value.nccl_version) and summary. It is what torch loaded, whatever the profile pinned.
    - Empty when the check did not run or no rank got as far as importing torch.
  returned: always
  type: str
  sample: 2.28.9
checks:
  description: Every check that ran, by name.
  returned: always
  type: dict
  contains:
    status:
      description: The outcome.
      type: str
      choices: [ok, warn, fail, skipped]
    value:
      description:
        - What was measured; its shape depends on the check.
        - V(nccl) has C(world_size), C(seconds), C(busbw_gbps), C(size_bytes), C(sum), C(expected), C(ranks) (the last
          phase of each), C(outcome), C(log_tail) and C(nccl_version) (V(null) when no rank said it).
        - V(gpu_clean) has C(gpus) (the GPUs looked at), C(foreign) (the PIDs of foreign processes), C(own) (one entry
          per process of the server's own and GPU, with C(pid), C(gpu_index), C(used_memory_mib), C(command) and
          C(by), what made it the server's, for example V(unit sglang-server.service)), C(own_errors) (the lookups of
          the server's processes that failed) and C(threshold_mib).
      type: raw
    summary:
      description: One line saying what was measured.
      type: str
    problems:
      description: One line per problem found.
      type: list
      elements: str
    hint:
      description: How to fix it, empty when V(ok).
      type: str
  sample: {"driver": {"status": "ok", "value": {"driver": "580.159.04", "cuda": "13.0"}, "summary": "driver 580.159.04",
           "problems": [], "hint": ""},
           "nccl": {"status": "ok", "value": {"world_size": 2, "seconds": 7.296, "busbw_gbps": 264.156, "size_bytes": 67108864,
                                              "sum": 3.0, "expected": 3, "ranks": {"0": "done", "1": "done"}, "outcome": "ok",
                                              "log_tail": [], "nccl_version": "2.28.9"},
                    "summary": "NCCL 2.28.9 all-reduce smoke test over 2 GPUs: sum 3 as expected, bus bandwidth 264.156 GB/s at
                      67108864 bytes, 7.296 s", "problems": [], "hint": ""}}
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils.gpu import health as gpu_health
from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.facts import collect_gpu_facts
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.nccl_smoke import run_smoke

VERSION_RE = re.compile(r'^[0-9]+(\.[0-9]+)*$')
# A systemd unit name (systemd.unit(5)): never an option of systemctl.
UNIT_RE = re.compile(r'^[A-Za-z0-9:_.@\\][A-Za-z0-9:_.@\\-]{0,255}\Z')
CHECK_NAMES = list(gpu_health.CHECKS)


def argument_spec():
    return dict(
        checks=dict(type='list', elements='str', choices=CHECK_NAMES, default=list(gpu_health.DEFAULT_CHECKS)),
        require=dict(type='list', elements='str', choices=CHECK_NAMES, default=CHECK_NAMES),
        expected_gpus=dict(type='int', default=0),
        compute_capabilities=dict(type='list', elements='str', default=[]),
        toolkit_version=dict(type='str', default=''),
        min_driver_version=dict(type='str', default=''),
        gpu_indices=dict(type='list', elements='int', default=[]),
        gpu_memory_threshold_mib=dict(type='int', default=1024),
        own_pids=dict(type='list', elements='int', default=[]),
        own_units=dict(type='list', elements='str', default=[]),
        own_pid_files=dict(type='list', elements='path', default=[]),
        ml_env_python=dict(type='path'),
        nccl_gpus=dict(type='int'),
        nccl_timeout=dict(type='int', default=60),
        nccl_size_mib=dict(type='int', default=64),
        nccl_iters=dict(type='int', default=20),
        nvidia_smi_path=dict(type='path'),
        command_timeout=dict(type='int', default=30),
    )


def bad_params(params):
    """One line per bad value, naming the option, the value and what is allowed."""
    bad = []
    for name in ('expected_gpus', 'gpu_memory_threshold_mib'):
        if params[name] < 0:
            bad.append('%s must be 0 or more, got %d' % (name, params[name]))
    for name in ('nccl_timeout', 'nccl_size_mib', 'nccl_iters', 'command_timeout'):
        if params[name] < 1:
            bad.append('%s must be at least 1, got %d' % (name, params[name]))
    if params['nccl_gpus'] is not None and params['nccl_gpus'] < 1:
        bad.append('nccl_gpus must be at least 1, got %d' % params['nccl_gpus'])
    for name in ('toolkit_version', 'min_driver_version'):
        if params[name] and not VERSION_RE.match(params[name]):
            bad.append('%s must be a dotted version like 13.0 or 580.65.06, got %r' % (name, params[name]))
    for capability in params['compute_capabilities']:
        if not re.match(r'^[0-9]+\.[0-9]+$', capability):
            bad.append('compute_capabilities holds %r; write each as major.minor, for example 12.0 for sm_120'
                       % capability)
    for unit in params['own_units']:
        if not UNIT_RE.match(unit):
            bad.append('own_units holds %r; write each as a systemd unit name, for example sglang-server.service'
                       % unit)
    for path in params['own_pid_files']:
        if not os.path.isabs(path):
            bad.append('own_pid_files holds %r; write each as an absolute path' % path)
    if 'nccl' in params['checks'] and not params['ml_env_python']:
        bad.append('the nccl check needs ml_env_python, the python of the ml-env release')
    return bad


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    bad = bad_params(params)
    if bad:
        module.fail_json(msg='; '.join(bad))

    run_command = module_runner(module, params['command_timeout'], environ_update={'LC_ALL': 'C'})
    smi = params['nvidia_smi_path'] or 'nvidia-smi'

    def find_binary(name):
        # An explicit path must not be searched for along PATH.
        if os.path.sep in name:
            return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
        return module.get_bin_path(name, opt_dirs=['/usr/sbin', '/sbin'])

    def gpu_facts():
        return collect_gpu_facts(run_command, find_binary, nvidia_smi_path=params['nvidia_smi_path'], warn=module.warn)

    host = gpu_health.Host(run_command, find_binary, gpu_facts, run_smoke, nvidia_smi=smi)
    result = gpu_health.Assessment(params, host).run()
    if not result['healthy']:
        module.fail_json(msg=gpu_health.failure_message(result['problems']), changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
