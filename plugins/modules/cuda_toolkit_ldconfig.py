#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cuda_toolkit_ldconfig
short_description: Register a CUDA toolkit's library directories with the dynamic loader in one call
version_added: 0.1.0
description:
  - Writes O(path) with O(content), owned by root with mode C(0644), only when it differs. The new file replaces
    the old one in one rename in the same directory.
  - Removes the files in the directory of O(path) whose names match O(replaces), O(path) excepted (the same
    toolkit under another order; only one file may name its directories).
  - Runs C(ldconfig) when the file was written or another removed, or when the loader cache O(cache) is missing
    or older than O(path) (a run that stopped before C(ldconfig)).
options:
  path:
    description: The toolkit's file, for example C(/etc/ld.so.conf.d/50-inferops-cuda-13-0.conf).
    type: path
    required: true
  content:
    description: What O(path) holds, byte for byte (the library directories, one a line).
    type: str
    required: true
  replaces:
    description:
      - A file name pattern (C(fnmatch)) in the directory of O(path), for example C(*-inferops-cuda-13-0.conf).
        The files it matches, O(path) excepted, are removed. Nothing is removed when it is not given.
    type: str
  cache:
    description: The loader cache C(ldconfig) writes; compared with O(path) to find a run that stopped before it.
    type: path
    default: /etc/ld.so.cache
  command_timeout:
    description: Seconds C(ldconfig) may run before it is killed.
    type: int
    default: 120
attributes:
  check_mode:
    support: full
    details: Reports in RV(conf_changed), RV(removed) and RV(ldconfig_ran) what would be done.
  diff_mode:
    support: full
    details: The content of O(path) before and after.
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Register CUDA 13.0's libraries, dropping its file under any other order
  inferops.gpu.cuda_toolkit_ldconfig:
    path: /etc/ld.so.conf.d/50-inferops-cuda-13-0.conf
    content: |
      /usr/local/cuda-13.0/lib64
    replaces: "*-inferops-cuda-13-0.conf"
"""

RETURN = r"""
path:
  description: O(path).
  returned: always
  type: str
  sample: /etc/ld.so.conf.d/50-inferops-cuda-13-0.conf
conf_changed:
  description: Whether O(path) was (in check mode, would be) written, or its owner or mode set.
  returned: always
  type: bool
  sample: true
removed:
  description: The files matching O(replaces) that were (in check mode, would be) removed.
  returned: always
  type: list
  elements: str
  sample: [/etc/ld.so.conf.d/40-inferops-cuda-13-0.conf]
ldconfig_ran:
  description: Whether C(ldconfig) ran (in check mode, would run).
  returned: always
  type: bool
  sample: true
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.cuda_toolkit.ldconfig import Files, run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            content=dict(type='str', required=True),
            replaces=dict(type='str'),
            cache=dict(type='path', default='/etc/ld.so.cache'),
            command_timeout=dict(type='int', default=120),
        ),
        supports_check_mode=True,
    )
    run_command = module_runner(module, module.params['command_timeout'])

    def run_ldconfig():
        return run_command([module.get_bin_path('ldconfig', required=True)])

    try:
        result = run(Files(), run_ldconfig, module.params, check_mode=module.check_mode)
    except CommandTimeout as exc:
        module.fail_json(msg=str(exc))
    except (IOError, OSError) as exc:
        module.fail_json(msg='%s: %s' % (module.params['path'], exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
