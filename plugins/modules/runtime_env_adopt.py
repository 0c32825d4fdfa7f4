#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: runtime_env_adopt
short_description: Take over the environment a host was given by hand, with a backup
version_added: 0.3.0
description:
  - Finds what M(inferops.gpu.runtime_env_host_edits) finds, with the same options, and undoes what would make the
    collection's result wrong, after a copy of every file it touches is made under O(backup_dir).
  - In each Python start-up file (C(sitecustomize.py), C(usercustomize.py), a C(.pth)) the statements that write a
    variable of O(managed_names) (or one they compute) become C(pass) and a comment holding the line; every other line
    stays, so the distro's own C(sitecustomize.py) runs as before. A symlink stays a link; its target is written.
  - In C(/etc/environment) and C(/etc/profile.d) the lines that set a variable of O(managed_names) (C(PATH) excepted)
    are commented out.
  - Each C(ld.so.conf.d) file from which the loader resolves a library of O(sonames) outside O(owned_roots) is moved
    into the backup, then C(ldconfig) runs.
  - Before anything is written it fails, changing nothing, when a write cannot be cut out alone (a statement that
    shares its line with another, the header of a block, a file Python cannot read), naming the file and line.
  - The backup directory holds C(adoption.json) (what was done, line by line) and C(undo.sh) (the copies back).
requirements:
  - Python 3.8 or later on the target (statement ends from C(ast)).
options:
  backup_dir:
    description: Where each adoption's backup goes, in a directory named for its time (UTC).
    type: path
    default: /var/backups/inferops-adopt
attributes:
  check_mode:
    support: full
    details: Reports in RV(edited) and RV(moved) what would be done; nothing is written.
  diff_mode:
    support: full
    details: The text before and after of each edited file.
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.host_scan
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Take over what was set by hand
  inferops.gpu.runtime_env_adopt:
    pythons: [/opt/ml-env/bin/python, /usr/bin/python3]
    managed_names: [CUDA_HOME, TRITON_PTXAS_PATH, NCCL_PROTO]
    owned_roots: [/usr/local/cuda-13.0, /opt/ml-env]
    sonames: [libcudart.so.13, libnccl.so.2]
"""

RETURN = r"""
backup:
  description: The directory of this adoption's backup (C(adoption.json), C(undo.sh), the copies); empty when nothing
    was done or in check mode.
  returned: always
  type: str
  sample: /var/backups/inferops-adopt/20261208T013000Z
edited:
  description: The files edited (or that would be), each with path and changes (line, names, text of the statement).
  returned: always
  type: list
  elements: dict
moved:
  description: The C(ld.so.conf.d) files moved into the backup (or that would be), each with path and taken (the
    libraries the loader took from it).
  returned: always
  type: list
  elements: dict
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import adoption, host_scan


def adopt(module, run, now=time.gmtime):
    params = module.params
    ldconfig = module.get_bin_path('ldconfig', opt_dirs=['/sbin', '/usr/sbin'])
    found = host_scan.scan(params, run, ldconfig, module.warn)
    try:
        actions = adoption.plan(found, params['owned_roots'], params['sonames'])
    except adoption.Refused as exc:
        module.fail_json(msg='cannot take over this host by itself (nothing was changed): %s' % exc)
    edited = [{'path': edit['path'], 'changes': edit['changes']} for edit in actions['edits']]
    result = dict(changed=bool(actions['edits'] or actions['moves']), backup='', edited=edited, moved=actions['moves'])
    if module._diff:
        result['diff'] = [{'before_header': edit['path'], 'after_header': edit['path'], 'before': edit['before'],
                           'after': edit['text']} for edit in actions['edits']]
    if not result['changed'] or module.check_mode:
        return result
    stamp = time.strftime('%Y%m%dT%H%M%SZ', now())
    record = adoption.apply(actions, '%s/%s' % (params['backup_dir'].rstrip('/'), stamp), stamp)
    result['backup'] = record['backup']
    if actions['moves']:
        if not ldconfig:
            module.fail_json(msg='ldconfig not found: the loader cache still names the moved files', **result)
        rc, out, err = run([ldconfig])
        if rc != 0:
            module.fail_json(msg='ldconfig failed (rc %s): %s' % (rc, (err or out).strip()[-300:]), **result)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(host_scan.ARGUMENT_SPEC, backup_dir=dict(type='path', default='/var/backups/inferops-adopt')),
        supports_check_mode=True,
    )
    try:
        result = adopt(module, module_runner(module, module.params['command_timeout']))
    except CommandTimeout as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
