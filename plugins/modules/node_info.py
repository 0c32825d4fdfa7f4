#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_info
short_description: Read what an inference node runs, for the fleet report, in one call
version_added: 0.1.0
description:
  - Reads, and never changes, everything the fleet report (C(playbooks/verify.yml)) shows of a node, in one
    call. The CUDA toolkit (C(ptxas --version), else its C(version.json)) and the toolkits installed beside it;
    the ml-env release the O(ml_env_path) link points to, its verification marker, C(.ml_env/verify.json),
    C(.ml_env/pins.json) and the C(*.dist-info) directories it has installed; runtime_env's spec; the GPUs and
    their topology (as M(inferops.gpu.gpu_info) reads them); the server's C(--config) file, unit file and health;
    the throughput gate's last measurement and the host's baseline; what the server's Python sees after its
    start-up against runtime_env's spec, the release's interpreter started as the unit starts it (its user,
    working directory, C(Environment=) and C(EnvironmentFile=) lines; M(inferops.gpu.runtime_env_effective)'s
    probe), when the server is installed under systemd.
  - The server's health is what M(inferops.gpu.sglang_server) with C(state=healthy) answers in check mode (the
    same managers and readiness contract), asked only when the server's C(--config) file is there. A server
    that is not running or not ready is a result, not a failure.
  - Returns the raw parts under the names the filter P(inferops.gpu.fleet_report_rows#filter) reads, as text where the
    filter parses text. A part the node lacks, or a read that fails, is empty (V('') or V([]) or V({})); no read fails
    the task.
  - The action plugin of the same name fills every option left out from the roles' own variables, resolved as the
    roles resolve them. The host's variables (inventory, C(-e)), else the roles' C(defaults/main.yml), with
    their C(vars/main.yml) for the names they derive (C(cuda_toolkit), C(ml_env), C(runtime_env), C(sglang_server),
    C(rolling)). It adds what the report compares on the controller (RV(lock_wanted), the NCCL profiles,
    RV(gateway_host)).
options:
  cuda_home:
    description:
      - The toolkit's directory (the cuda_toolkit role's C(<cuda_toolkit_root>/cuda-<cuda_toolkit_version>)).
        Not set reads no toolkit.
    type: path
  cuda_toolkit_root:
    description: Where the toolkits are installed side by side (C(cuda-X.Y) directories). Not set lists none.
    type: path
  ml_env_path:
    description: The ml-env link (C(ml_env_path)). Not set reads no release.
    type: path
  runtime_env_spec:
    description: runtime_env's JSON spec. Not set reads none.
    type: path
  gpu:
    description: Read the GPUs, as M(inferops.gpu.gpu_info) does (NVML, else C(nvidia-smi)).
    type: bool
    default: true
  server:
    description:
      - How the sglang_server role set up the server. Not set reads no server.
    type: dict
    suboptions:
      config:
        description: The server's C(--config) file; the role writes it for either manager. Not there, the server is not installed.
        type: path
        required: true
      manager:
        description: V(systemd) (a unit) or V(process) (a process group with a pidfile in O(server.run_dir)).
        type: str
        choices: [systemd, process]
        default: systemd
      unit:
        description: The server's systemd unit.
        type: str
      unit_file:
        description: The unit's file, read with O(server.manager=systemd); its C(ExecStart) names the model.
        type: path
      log_path:
        description: The server's log, where the ready line is looked for.
        type: path
        required: true
      run_dir:
        description: The directory of the server's C(ready.json) and, with O(server.manager=process), its pidfile.
        type: path
        required: true
      host:
        description: Where to reach the server (a wildcard bind is probed on loopback).
        type: str
        required: true
      port:
        description: The server's port.
        type: int
        required: true
      api_key:
        description: The server's API key, sent as a bearer token. Never logged.
        type: str
      served_model_name:
        description: When set, C(/v1/models) must name this model.
        type: str
      skip_warmup:
        description: The server runs with C(--skip-server-warmup), so it never logs the ready line.
        type: bool
        default: false
      ready_line:
        description: The server's log level prints INFO lines, so its log has the ready line.
        type: bool
        default: true
      probe:
        description: Probe the full readiness contract (rank 0); V(false) on the followers of a multi-node launch.
        type: bool
        default: true
  state_dir:
    description: The directory of C(throughput-last.json) and C(throughput-baseline.json). Not set reads neither.
    type: path
  command_timeout:
    description: Seconds one command (C(ptxas), C(nvidia-smi), C(systemctl)) may run before it is killed.
    type: int
    default: 30
attributes:
  action:
    support: full
    details: The action plugin fills the options left out from the roles' variables and adds the controller's parts.
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: Reads the same in check mode; nothing is ever changed.
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
seealso:
  - module: inferops.gpu.gpu_info
  - module: inferops.gpu.sglang_server
  - plugin: inferops.gpu.fleet_report_rows
    plugin_type: filter
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Read the node with the roles' settings (the inventory's, else the roles' defaults)
  inferops.gpu.node_info:
  register: node

- name: Show the release the node runs
  ansible.builtin.debug:
    msg: "{{ node.release | default('no release', true) }}"

- name: A row of the fleet report
  ansible.builtin.debug:
    msg: "{{ [{'host': inventory_hostname, 'data': node}] | inferops.gpu.fleet_report_rows }}"

- name: Read one toolkit only, no GPUs, no server
  inferops.gpu.node_info:
    cuda_home: /usr/local/cuda-12.8
    gpu: false
"""

RETURN = r"""
cuda_home:
  description: The toolkit's directory that was read.
  returned: always
  type: str
  sample: /usr/local/cuda-13.0
ptxas_stdout:
  description: What C(ptxas --version) printed, empty when it did not answer (not there, or failed).
  returned: always
  type: str
  sample: "ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, release 13.0, V13.0.88\n"
cuda_version_json:
  description: The toolkit's C(version.json), read only when C(ptxas) did not answer; empty when unreadable.
  returned: always
  type: str
toolkits_found:
  description: The C(cuda-*) directories under O(cuda_toolkit_root) (links not counted).
  returned: always
  type: list
  elements: str
  sample: [cuda-12.8, cuda-13.0]
ml_env_path:
  description: The ml-env link that was read.
  returned: always
  type: str
  sample: /opt/ml-env
release:
  description: The release the ml-env link resolves to; empty when O(ml_env_path) is no link.
  returned: always
  type: str
  sample: /opt/ml-env.d/releases/0123456789ab
verified_marker:
  description: The release's C(.verified) marker (the hash that names it); empty when there is none.
  returned: always
  type: str
verify_json:
  description: The release's verification report, C(.ml_env/verify.json), as text.
  returned: always
  type: str
pins_json:
  description: The pin set the release was built from, C(.ml_env/pins.json) (its C(lock) is the lock's SHA-256), as text.
  returned: always
  type: str
dist_infos:
  description: The names of the release's C(*.dist-info) directories (C(lib/pythonX.Y/site-packages)).
  returned: always
  type: list
  elements: str
  sample: [torch-2.9.1+cu130.dist-info, sglang-0.5.9.dist-info]
runtime_env_json:
  description: runtime_env's spec, as text.
  returned: always
  type: str
gpu:
  description:
    - The GPUs as M(inferops.gpu.gpu_info) returns them (C(backend), C(count), C(reason), C(driver_version),
      C(cuda_driver_version), C(gpus), C(topology)) without C(processes); C(failed) and C(msg) when C(nvidia-smi) hung;
      empty with O(gpu=false).
  returned: always
  type: dict
  sample: {backend: nvidia-smi, count: 2, topology: {summary: nvlink}}
server_installed:
  description: Whether the server's C(--config) file is there; null without O(server) (not read).
  returned: always
  type: bool
server:
  description:
    - What M(inferops.gpu.sglang_server) C(state=healthy) answered in check mode, reduced to C(ready), C(msg),
      C(reason), C(cause), C(served_model_name) and C(model_info) (those it gave); empty when the server is not installed,
      null without O(server).
  returned: always
  type: dict
  sample: {ready: true, served_model_name: kimi-k2.5, model_info: {model_path: /models/kimi-k2.5}}
unit_text:
  description: The server's unit file, with O(server.manager=systemd); empty otherwise or when unreadable.
  returned: always
  type: str
environment_seen:
  description:
    - What the server's Python sees against runtime_env's spec, started as the unit starts it. C(differs) lists each
      variable whose value differs from what the unit gives it, as C(NAME=value (where it was set)); C(problems) the
      full lines; C(error) why it could not be read. Null without an installed server's unit file or a spec.
  returned: always
  type: dict
  sample: {differs: ["CUDA_HOME=/usr/local/cuda-12.8 (/usr/lib/python3.12/sitecustomize.py line 9)"], problems: [], error: ""}
throughput_last_json:
  description: The throughput gate's last measurement (C(throughput-last.json)), as text.
  returned: always
  type: str
throughput_baseline_json:
  description: The host's recorded baseline (C(throughput-baseline.json)), as text.
  returned: always
  type: str
lock_wanted:
  description:
    - The SHA-256 of the lock the inventory's ml_env profile names, found as the ml_env role finds it (absolute,
      the role's C(files/), or the playbook's C(files/) or directory); V(none) for a profile without a lock,
      V(unreadable) when it cannot be read.
  returned: through the action plugin
  type: str
nccl_profile:
  description: The NCCL profile the inventory asks for (C(runtime_env_nccl_profile)).
  returned: through the action plugin
  type: str
  sample: auto
nccl_topology:
  description: The topology the inventory sets for V(auto) (C(runtime_env_topology)); empty to take the GPUs'.
  returned: through the action plugin
  type: str
nccl_profiles:
  description: runtime_env's built-in NCCL profiles with C(runtime_env_nccl_profiles) merged over them.
  returned: through the action plugin
  type: dict
nccl_topology_map:
  description: runtime_env's topology map with C(runtime_env_nccl_profile_by_topology) merged over it.
  returned: through the action plugin
  type: dict
gateway_host:
  description:
    - The host of SGLang's model gateway the node is drained through (the rolling role's C(rolling_gateway_host));
      empty for none. The module does not ask the gateway (C(verify.yml) asks it once, on its host).
  returned: through the action plugin
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.fleet.node_info import Host, read_node
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.facts import collect_gpu_facts
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.server_module import http as server_http

SERVER_OPTIONS = dict(
    config=dict(type='path', required=True),
    manager=dict(type='str', default='systemd', choices=['systemd', 'process']),
    unit=dict(type='str'),
    unit_file=dict(type='path'),
    log_path=dict(type='path', required=True),
    run_dir=dict(type='path', required=True),
    host=dict(type='str', required=True),
    port=dict(type='int', required=True),
    api_key=dict(type='str', no_log=True),
    served_model_name=dict(type='str'),
    skip_warmup=dict(type='bool', default=False),
    ready_line=dict(type='bool', default=True),
    probe=dict(type='bool', default=True),
)


def problems(params):
    found = []
    if params['command_timeout'] < 1:
        found.append('command_timeout must be at least 1 (got %s)' % params['command_timeout'])
    server = params['server']
    if server:
        if server['manager'] == 'systemd' and not server['unit']:
            found.append('server.unit is required with server.manager=systemd')
        if not 1 <= server['port'] <= 65535:
            found.append('server.port must be from 1 to 65535 (got %s)' % server['port'])
    return found


def main():
    module = AnsibleModule(
        argument_spec=dict(
            cuda_home=dict(type='path'),
            cuda_toolkit_root=dict(type='path'),
            ml_env_path=dict(type='path'),
            runtime_env_spec=dict(type='path'),
            gpu=dict(type='bool', default=True),
            server=dict(type='dict', options=SERVER_OPTIONS),
            state_dir=dict(type='path'),
            command_timeout=dict(type='int', default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    found = problems(params)
    if found:
        module.fail_json(msg='; '.join(found))
    run = module_runner(module, params['command_timeout'])
    # gpu_info's runner: nvidia-smi's output parsed in the C locale.
    gpu_run = module_runner(module, params['command_timeout'], environ_update={'LC_ALL': 'C'})

    def gpu_facts():
        return collect_gpu_facts(gpu_run, module.get_bin_path, warn=module.warn)

    # The server's transport (plain http.client for http://; no proxy).
    result = read_node(Host(run, server_http, gpu_facts, setpriv=module.get_bin_path('setpriv') or 'setpriv'), params)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
