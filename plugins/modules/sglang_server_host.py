#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_server_host
short_description: Read what the sglang_server role needs of a host, in one call
version_added: 0.1.0
description:
  - Reads, and never changes, the release the ml-env link O(release_link) points at, whether
    O(environment_file) is a regular file and its checksum, the account O(user), and the groups that own
    the GPU device nodes (C(nvidia*) and C(renderD*) under O(device_dir), two levels deep).
  - Says whether the task runs in check mode, whichever way check mode was asked for (C(--check) or the
    C(check_mode) keyword), which C(ansible_check_mode) alone does not.
options:
  release_link:
    description: The link to the current ml-env release; not read when not given.
    type: path
  environment_file:
    description: The runtime environment's systemd EnvironmentFile.
    type: path
    required: true
  user:
    description: The service account's name.
    type: str
    required: true
  device_dir:
    description: Where the device nodes are.
    type: path
    default: /dev
attributes:
  check_mode:
    support: full
    details: Reads the same in check mode, and says so in RV(check_mode).
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Read the host
  inferops.gpu.sglang_server_host:
    release_link: /opt/ml-env
    environment_file: /etc/inferops/runtime-env.env
    user: sglang
  register: host
"""

RETURN = r"""
check_mode:
  description: Whether this task ran in check mode.
  returned: always
  type: bool
  sample: false
release:
  description: The real path O(release_link) points at; empty when it is no link or was not given.
  returned: always
  type: str
  sample: /opt/ml-env.d/releases/3f2a9c1e
environment_file:
  description: O(environment_file) as found.
  returned: always
  type: dict
  contains:
    isreg:
      description: Whether the path itself is a regular file (a link is not).
      type: bool
    checksum:
      description: Its SHA-1, empty when it is no regular file.
      type: str
user_exists:
  description: Whether the account O(user) exists.
  returned: always
  type: bool
  sample: true
user_uid:
  description: The account's uid, -1 when it does not exist.
  returned: always
  type: int
  sample: 998
device_groups:
  description: The groups other than root that own a GPU device node, sorted.
  returned: always
  type: list
  elements: str
  sample: [render, video]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils.sglang_server_host import Host, read


def main():
    module = AnsibleModule(
        argument_spec=dict(
            release_link=dict(type='path'),
            environment_file=dict(type='path', required=True),
            user=dict(type='str', required=True),
            device_dir=dict(type='path', default='/dev'),
        ),
        supports_check_mode=True,
    )
    try:
        result = read(Host(), module.params, module.check_mode)
    except (IOError, OSError) as exc:
        module.fail_json(msg='reading the host: %s' % exc)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
