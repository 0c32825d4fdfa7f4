#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: runtime_env_host_edits
short_description: Find the environment a host was given by hand, without running any of it
version_added: 0.3.0
description:
  - Reads, never runs, every Python start-up file of O(pythons) (each C(.pth) of their site directories and of the
    user sites of O(homes), C(sitecustomize.py) and C(usercustomize.py) in their standard library or site
    directories), C(/etc/environment), the scripts of C(/etc/profile.d) and the files of C(/etc/ld.so.conf.d), and
    lists every write to the environment with its file and line, and every C(ld.so.conf.d) entry that adds a
    directory holding the CUDA runtime's or NCCL's libraries outside O(owned_roots) and the system's own directories.
  - Fails (O(refuse)) on what would make the collection's result wrong, naming the file, the line and what to do; a
    Python start-up file that assigns or removes a variable of O(managed_names) (it runs after the runtime_env
    start-up hook in every interpreter of the host), and an C(ld.so.conf.d) entry from which the loader resolves a
    library of O(sonames) outside O(owned_roots) (C(ldconfig -p)). The rest are warnings.
  - Values are never read back or returned, only names and places.
options:
  refuse:
    description: Fail when a finding would make the collection's result wrong.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.host_scan
  - inferops.gpu.attributes.read_only
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Find what was set by hand
  inferops.gpu.runtime_env_host_edits:
    pythons: [/opt/ml-env/bin/python, /usr/bin/python3]
    homes: [/root, /var/lib/sglang]
    managed_names: [CUDA_HOME, TRITON_PTXAS_PATH, NCCL_PROTO]
    owned_roots: [/usr/local/cuda-13.0, /opt/ml-env]
    sonames: [libcudart.so.13, libnccl.so.2]
"""

RETURN = r"""
findings:
  description: Every write to the environment found, with its file, line, name, how (C(assigns), C(removes),
    C(sets a default for)) and kind (C(python) or C(login)); and every foreign library directory (file, line, directory).
  returned: always
  type: list
  elements: dict
problems:
  description: The findings that make the collection's result wrong, one line each with what to do.
  returned: always
  type: list
  elements: str
cautions:
  description: The other findings, one line each (also warned).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import host_scan


def find(module, run):
    ldconfig = module.get_bin_path('ldconfig', opt_dirs=['/sbin', '/usr/sbin'])
    found = host_scan.scan(module.params, run, ldconfig, module.warn)
    return dict(changed=False, findings=found['findings'] + found['loader'], problems=found['problems'],
                cautions=found['cautions'])


def main():
    module = AnsibleModule(
        argument_spec=dict(host_scan.ARGUMENT_SPEC, refuse=dict(type='bool', default=True)),
        supports_check_mode=True,
    )
    try:
        result = find(module, module_runner(module, module.params['command_timeout']))
    except CommandTimeout as exc:
        module.fail_json(msg=str(exc))
    for warning in result['cautions']:
        module.warn(warning)
    if result['problems'] and module.params['refuse']:
        module.fail_json(msg='set by hand on this host, against what the collection sets: %s'
                         % '; '.join(result['problems']), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
