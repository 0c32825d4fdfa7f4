#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cuda_toolkit_link
short_description: Point the default CUDA toolkit link at one toolkit, or put it back where it was
version_added: 0.1.0
description:
  - With O(state=present), makes O(path) a symlink to O(src), replacing an older link in one rename. A directory or
    file at O(path) is never replaced.
  - With O(state=restored), puts O(path) back where it resolved to before an installer ran (O(previous)). NVIDIA's
    packages register O(path) with C(update-alternatives) (the link then goes through C(/etc/alternatives/cuda))
    and runfiles point it at the version they install. When O(previous) is empty there was no link; the one the
    installer made is removed with its alternative for O(home). When the link goes through the alternatives and
    O(previous) is a registered alternative, C(update-alternatives --set) chooses it; otherwise the link is pointed
    at O(previous) directly.
options:
  path:
    description: The default toolkit link.
    type: path
    default: /usr/local/cuda
  state:
    description:
      - V(present) points O(path) at O(src).
      - V(restored) puts O(path) back to O(previous).
    type: str
    choices: [present, restored]
    default: present
  src:
    description: The toolkit O(path) points at with O(state=present), for example C(/usr/local/cuda-13.0).
    type: path
  previous:
    description:
      - With O(state=restored), the real path O(path) resolved to before installing (the C(lnk_source) of
        M(ansible.builtin.stat)); empty when there was no link.
    type: str
    default: ''
  home:
    description: With O(state=restored), the toolkit just installed, whose alternative is removed when there was no link.
    type: path
  command_timeout:
    description: Seconds one C(update-alternatives) call may run before it is killed.
    type: int
    default: 60
attributes:
  check_mode:
    support: full
    details: Reports the steps in RV(actions) and the predicted link in the diff.
  diff_mode:
    support: full
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Remember where /usr/local/cuda points
  ansible.builtin.stat:
    path: /usr/local/cuda
    follow: false
  register: cuda_link_before

- name: Put /usr/local/cuda back after a package installed another toolkit
  inferops.gpu.cuda_toolkit_link:
    state: restored
    previous: "{{ cuda_link_before.stat.lnk_source | default('') }}"
    home: /usr/local/cuda-13.0

- name: Make CUDA 13.0 the default toolkit
  inferops.gpu.cuda_toolkit_link:
    src: /usr/local/cuda-13.0
"""

RETURN = r"""
path:
  description: O(path).
  returned: always
  type: str
  sample: /usr/local/cuda
state:
  description: What O(path) is afterwards (in check mode, would be), V(absent), V(link), V(directory) or V(file).
  returned: always
  type: str
  sample: link
src:
  description: The link's text afterwards, empty when O(path) is no link.
  returned: always
  type: str
  sample: /etc/alternatives/cuda
resolved:
  description: The real path the link leads to afterwards, empty when O(path) is no link.
  returned: always
  type: str
  sample: /usr/local/cuda-12.8
actions:
  description: The steps taken (in check mode, that would be taken).
  returned: always
  type: list
  elements: str
  sample: [update-alternatives --set cuda /usr/local/cuda-12.8]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.cuda_toolkit.link import Host, run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', default='/usr/local/cuda'),
            state=dict(type='str', default='present', choices=['present', 'restored']),
            src=dict(type='path'),
            previous=dict(type='str', default=''),
            home=dict(type='path'),
            command_timeout=dict(type='int', default=60),
        ),
        required_if=[('state', 'present', ['src']), ('state', 'restored', ['home'])],
        supports_check_mode=True,
    )
    run_command = module_runner(module, module.params['command_timeout'])
    host = Host(run_command, module.get_bin_path('update-alternatives'))
    try:
        result = run(host, module.params, check_mode=module.check_mode)
    except (ValueError, CommandTimeout) as exc:
        module.fail_json(msg=str(exc))
    except (IOError, OSError) as exc:
        module.fail_json(msg='%s: %s' % (module.params['path'], exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
