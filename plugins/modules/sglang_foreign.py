#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_foreign
short_description: Find the SGLang servers the collection does not run
version_added: 0.3.0
description:
  - Lists every SGLang server on the host (C(-m sglang.launch_server), C(sglang serve)) that is neither in O(unit)'s
    cgroup nor the process tree of the collection's process manager (O(pidfile)), with its PID, command line (the
    values of options named like secrets masked), interpreter and venv, working directory, log (where its output
    goes), and whether it holds O(port) or a GPU (O(gpus)).
  - Fails (O(refuse)) when one holds O(port) or a GPU, naming it and how to stop it, since the collection's server could
    not start beside it. Another is a warning.
options:
  port:
    description: The port the collection's server listens on.
    type: int
    required: true
  unit:
    description: The collection's systemd unit; its processes are the collection's.
    type: str
    default: sglang-server.service
  pidfile:
    description: The process manager's pidfile (C(PID STARTTIME)); its process tree is the collection's. Empty reads none.
    type: path
    default: ''
  gpus:
    description: Ask the GPUs (NVML or nvidia-smi) which processes use them; a host without either has none.
    type: bool
    default: true
  refuse:
    description: Fail when a server the collection does not run holds O(port) or a GPU.
    type: bool
    default: true
  adopt:
    description:
      - Such a server is to be stopped inside the switch (M(inferops.gpu.sglang_server)'s O(inferops.gpu.sglang_server#module:replace)),
        not refused; it is a warning saying so.
    type: bool
    default: false
  command_timeout:
    description: Seconds each command (nvidia-smi) may take.
    type: int
    default: 60
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.attributes.read_only
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Find SGLang servers started by hand
  inferops.gpu.sglang_foreign:
    port: 30000
    unit: sglang-server.service
    pidfile: /var/log/sglang/sglang-server.pid
"""

RETURN = r"""
servers:
  description: The servers found, each with pid, start (its start time, in clock ticks after boot, which names this
    process and no later one of the same PID), pids (its tree), cmdline (secrets masked), python, venv, cwd, log, port
    (whether it holds O(port)) and gpus (the PIDs of its tree that use a GPU).
  returned: always
  type: list
  elements: dict
in_the_way:
  description: The servers that hold O(port) or a GPU, each as pid and start (M(inferops.gpu.sglang_server)'s
    O(inferops.gpu.sglang_server#module:replace) takes them).
  returned: always
  type: list
  elements: dict
in_the_way_pids:
  description: Every PID of their trees (the preflight counts them as the server's own when they are taken over).
  returned: always
  type: list
  elements: int
problems:
  description: One line for each server that holds O(port) or a GPU (none with O(adopt)).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs
from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.facts import collect_gpu_facts
from ansible_collections.inferops.gpu.plugins.module_utils.sglang import foreign


def managed_pids(pidfile, proc=procfs.PROC):
    """The process manager's server, when its pidfile names a live process with the recorded start time."""
    try:
        with open(pidfile) as handle:
            pid, starttime = (int(word) for word in handle.read().split()[:2])
    except (IOError, OSError, ValueError):
        return []
    info = procfs.read_proc(pid, proc)
    return [pid] if info is not None and info.starttime == starttime else []


def main():
    module = AnsibleModule(
        argument_spec=dict(
            port=dict(type='int', required=True),
            unit=dict(type='str', default='sglang-server.service'),
            pidfile=dict(type='path', default=''),
            gpus=dict(type='bool', default=True),
            refuse=dict(type='bool', default=True),
            adopt=dict(type='bool', default=False),
            command_timeout=dict(type='int', default=60),
        ),
        supports_check_mode=True,
    )
    params = module.params
    gpu_pids = []
    if params['gpus']:
        try:
            facts = collect_gpu_facts(module_runner(module, params['command_timeout']), module.get_bin_path,
                                      warn=module.warn)
        except CommandTimeout as exc:
            module.fail_json(msg=str(exc))
        gpu_pids = [process['pid'] for process in facts.get('processes') or []]
    own = managed_pids(params['pidfile']) if params['pidfile'] else []
    servers = foreign.find(params['port'], params['unit'], own_pids=own, gpu_pids=gpu_pids)
    problems, warnings = foreign.judge(servers, params['port'], adopt=params['adopt'])
    for warning in warnings:
        module.warn(warning)
    in_the_way = [server for server in servers if server['port'] or server['gpus']]
    result = dict(changed=False, servers=servers, problems=problems,
                  in_the_way=[{'pid': server['pid'], 'start': server['start']} for server in in_the_way],
                  in_the_way_pids=sorted(pid for server in in_the_way for pid in server['pids']))
    if problems and params['refuse']:
        module.fail_json(msg='; '.join(problems), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
