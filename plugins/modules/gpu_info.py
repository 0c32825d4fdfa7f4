#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_info
short_description: Report NVIDIA GPUs, driver, running processes and GPU-to-GPU topology
version_added: 0.1.0
description:
  - Reports the NVIDIA GPUs of the target, the driver and CUDA driver API versions, the compute processes
    using each GPU, and how every pair of GPUs is connected (NVLink, PCIe switch, host bridge or CPU interconnect).
  - Uses NVML through the C(pynvml) module of C(nvidia-ml-py) when it can be imported on the target,
    and C(nvidia-smi) otherwise. With both available, the pair topology comes from C(nvidia-smi topo -m).
  - A host without a usable GPU is not an error. The module then returns RV(count=0), RV(backend=none)
    and a RV(reason) naming what was tried and what the tools said, unless O(require=true).
  - Never changes anything on the target; C(changed) is always V(false).
options:
  require:
    description:
      - Fail the task when no GPU can be found, with RV(reason) as the failure message.
    type: bool
    default: false
  backend:
    description:
      - How to query the GPUs.
      - V(auto) tries NVML first and falls back to C(nvidia-smi) when C(pynvml) cannot be imported
        or NVML cannot be initialised.
      - V(nvml) and V(nvidia-smi) use only that backend. Topology is still read from C(nvidia-smi topo -m)
        with V(nvml) when C(nvidia-smi) is present.
    type: str
    choices: [auto, nvml, nvidia-smi]
    default: auto
  nvidia_smi_path:
    description:
      - Path of the C(nvidia-smi) executable.
      - When not set, C(nvidia-smi) is looked up in E(PATH) and the usual system directories.
    type: path
  command_timeout:
    description:
      - Seconds one C(nvidia-smi) call may run before it is killed and the module fails naming it.
        C(nvidia-smi) hangs on a GPU that fell off the bus; a hung call is a failure even with O(require=false).
    type: int
    default: 30
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.attributes.read_only
requirements:
  - C(nvidia-ml-py) on the target for the NVML backend, or C(nvidia-smi) from the NVIDIA driver.
notes:
  - GPU indices are NVML / C(nvidia-smi) indices (PCI bus order). They ignore E(CUDA_VISIBLE_DEVICES)
    and can differ from CUDA device ordinals.
  - Process names may be empty when neither NVML nor C(/proc) can resolve a PID, for example
    for processes in another PID namespace.
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Gather GPU information
  inferops.gpu.gpu_info:
  register: gpu

- name: Show the interconnect
  ansible.builtin.debug:
    msg: "{{ gpu.count }} GPUs, topology {{ gpu.topology.summary }}, driver {{ gpu.driver_version }}"

- name: Refuse tensor parallelism across PCIe-only GPUs
  ansible.builtin.assert:
    that: gpu.topology.summary in ['single', 'nvlink']
    fail_msg: "TP={{ gpu.count }} needs NVLink, found {{ gpu.topology.summary }}"

- name: Fail early on a host whose driver is broken
  inferops.gpu.gpu_info:
    require: true

- name: Use a driver from a non-standard prefix and skip NVML
  inferops.gpu.gpu_info:
    backend: nvidia-smi
    nvidia_smi_path: /opt/nvidia/bin/nvidia-smi
  register: gpu

- name: GPUs currently busy with compute processes
  ansible.builtin.debug:
    msg: "{{ gpu.processes | map(attribute='gpu_index') | unique | list }}"
"""

RETURN = r"""
backend:
  description: Backend that produced the data, or V(none) when no GPU could be queried.
  returned: always
  type: str
  choices: [nvml, nvidia-smi, none]
  sample: nvml
count:
  description: Number of GPUs found.
  returned: always
  type: int
  sample: 2
reason:
  description:
    - Why no GPU is reported. Empty when GPUs were found.
    - Names each backend tried and the message it gave, for example the C(nvidia-smi) output
      when the driver cannot be reached.
  returned: always
  type: str
  sample: >-
    NVML: nvmlInit failed: Driver Not Loaded; nvidia-smi: `/usr/bin/nvidia-smi --query-gpu=...` exited with code 9:
    NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.
driver_version:
  description: NVIDIA kernel driver version. Empty when unknown.
  returned: always
  type: str
  sample: 580.159.04
cuda_driver_version:
  description: Highest CUDA version the driver supports, as C(major.minor). Empty when unknown.
  returned: always
  type: str
  sample: "13.0"
gpus:
  description: One entry per GPU, ordered by index.
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      name: NVIDIA H200
      uuid: GPU-58ba15e6-1c11-a763-4606-42abd72ef835
      pci_bus_id: 00000000:00:06.0
      memory_total_mib: 143771
      memory_used_mib: 4623
      compute_capability: "9.0"
      numa_node: 0
  contains:
    index:
      description: NVML / C(nvidia-smi) index of the GPU.
      type: int
      sample: 0
    name:
      description: Product name.
      type: str
      sample: NVIDIA H200
    uuid:
      description: GPU UUID.
      type: str
      sample: GPU-58ba15e6-1c11-a763-4606-42abd72ef835
    pci_bus_id:
      description: PCI bus id, C(domain:bus:device.function) with an 8 digit domain.
      type: str
      sample: 00000000:00:06.0
    memory_total_mib:
      description: Total framebuffer memory in MiB. V(null) when the driver does not report it.
      type: int
      sample: 143771
    memory_used_mib:
      description:
        - Used framebuffer memory in MiB, as C(nvidia-smi) shows it (without the memory the driver reserves).
        - V(null) when the driver does not report it.
      type: int
      sample: 4623
    compute_capability:
      description: CUDA compute capability as C(major.minor). V(null) when not reported.
      type: str
      sample: "9.0"
    numa_node:
      description: NUMA node the GPU is attached to, from C(nvidia-smi topo -m). V(null) when unknown.
      type: int
      sample: 0
processes:
  description: Compute processes running on the GPUs. A process using several GPUs appears once per GPU.
  returned: always
  type: list
  elements: dict
  sample:
    - gpu_index: 0
      gpu_uuid: GPU-58ba15e6-1c11-a763-4606-42abd72ef835
      pid: 562
      name: python3
      used_memory_mib: 4614
  contains:
    gpu_index:
      description: Index of the GPU. V(null) when the UUID is not one of RV(gpus), for example a MIG instance.
      type: int
      sample: 0
    gpu_uuid:
      description: UUID of the GPU, as reported for the process.
      type: str
      sample: GPU-58ba15e6-1c11-a763-4606-42abd72ef835
    pid:
      description: Process id, in the PID namespace of the driver.
      type: int
      sample: 562
    name:
      description: Process name as reported by the driver, or from C(/proc/<pid>/comm). Empty when unknown.
      type: str
      sample: python3
    used_memory_mib:
      description: GPU memory used by the process in MiB. V(null) when the driver reports it as not available.
      type: int
      sample: 4614
topology:
  description: How the GPUs are connected to each other.
  returned: always
  type: dict
  sample:
    summary: nvlink
    legend_source: nvidia-smi
    pairs:
      - gpus: [0, 1]
        link: NV18
        type: nvlink
        nvlinks: 18
  contains:
    summary:
      description:
        - V(none) without GPUs, V(single) for one GPU.
        - V(nvlink) when every GPU pair is connected by NVLink, V(pcie) when none is, V(mixed) otherwise.
        - V(unknown) when the topology could not be read for every pair, or when no pair is NVLink
          and some pair has an unknown link type.
      type: str
      choices: [none, single, nvlink, pcie, mixed, unknown]
      sample: nvlink
    legend_source:
      description:
        - Where RV(topology.pairs) came from.
        - V(nvidia-smi) means the C(nvidia-smi topo -m) matrix.
        - V(nvml) means NVML P2P status and common ancestor, written with the same codes (V(NV) without a link count).
        - V(none) when there is no pair to classify or no source answered.
      type: str
      choices: [nvidia-smi, nvml, none]
      sample: nvidia-smi
    pairs:
      description: One entry per unordered pair of GPUs, ordered by the GPU indices.
      type: list
      elements: dict
      contains:
        gpus:
          description: The two GPU indices, lower first.
          type: list
          elements: int
          sample: [0, 1]
        link:
          description: Code from the C(nvidia-smi topo -m) legend, for example V(NV18), V(PIX), V(PXB), V(PHB), V(NODE), V(SYS).
          type: str
          sample: NV18
        type:
          description:
            - V(nvlink) for C(NV#), V(pcie_switch) for V(PIX) and V(PXB), V(host_bridge) for V(PHB) and V(NODE),
              V(cpu_interconnect) for V(SYS), V(unknown) otherwise.
          type: str
          choices: [nvlink, pcie_switch, host_bridge, cpu_interconnect, unknown]
          sample: nvlink
        nvlinks:
          description: Number of bonded NVLinks for an NVLink pair, V(0) for other pairs, V(null) when NVML saw NVLink but not the count.
          type: int
          sample: 18
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.facts import BACKENDS, collect_gpu_facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            require=dict(type='bool', default=False),
            backend=dict(type='str', default='auto', choices=list(BACKENDS)),
            nvidia_smi_path=dict(type='path'),
            command_timeout=dict(type='int', default=30),
        ),
        supports_check_mode=True,
    )

    run_command = module_runner(module, module.params['command_timeout'], environ_update={'LC_ALL': 'C'})

    def find_binary(name):
        # An explicit nvidia_smi_path must not be searched for along PATH.
        if os.path.sep in name:
            return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
        return module.get_bin_path(name)

    try:
        facts = collect_gpu_facts(
            run_command,
            find_binary,
            backend=module.params['backend'],
            nvidia_smi_path=module.params['nvidia_smi_path'],
            warn=module.warn,
        )
    except CommandTimeout as exc:
        module.fail_json(msg='%s; a GPU that fell off the bus makes nvidia-smi hang: look for Xid 79 in the kernel log'
                         % exc)
    if module.params['require'] and facts['count'] == 0:
        module.fail_json(msg=facts['reason'], **facts)
    module.exit_json(changed=False, **facts)


if __name__ == '__main__':
    main()
