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
  - Says whether the account is already as the role's group and user tasks would leave it, whether each
    of O(paths) exists, and the active and enablement states of O(units) (one C(systemctl show), bounded by
    O(command_timeout)), so that the role runs those tasks only where they would change something.
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
  group:
    description: The service account's primary group, for RV(account_as_wanted).
    type: str
  home:
    description: The service account's home, for RV(account_as_wanted).
    type: path
  shell:
    description: The service account's shell, for RV(account_as_wanted).
    type: path
  paths:
    description: Paths whose existence RV(exists) reports (a link counts, even a dangling one).
    type: list
    elements: path
    default: []
  units:
    description: systemd units whose states RV(units) reports; none on a host without systemd.
    type: list
    elements: str
    default: []
  command_timeout:
    description: Seconds C(systemctl show) may take before it is killed.
    type: int
    default: 60
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.attributes.read_only
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Read the host
  inferops.gpu.sglang_server_host:
    release_link: /opt/ml-env
    environment_file: /etc/inferops/runtime-env.env
    user: sglang
    group: sglang
    home: /var/lib/sglang
    shell: /usr/sbin/nologin
    paths: [/etc/systemd/system/sglang-server.service]
    units: [sglang-server.service]
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
account_as_wanted:
  description:
    - Whether the account exists with O(group) as its primary group, O(home) and O(shell), and is a member of
      every group of RV(device_groups); false when any of O(group), O(home), O(shell) is not given.
  returned: always
  type: bool
  sample: true
exists:
  description: For each of O(paths), whether it exists.
  returned: always
  type: dict
  sample: {/etc/systemd/system/sglang-server.service: true}
units:
  description: For each of O(units), its C(ActiveState) and C(UnitFileState) (empty when systemd cannot say).
  returned: always
  type: dict
  sample: {sglang-server.service: {active: active, enabled: enabled}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.server_host import Host, read


def main():
    module = AnsibleModule(
        argument_spec=dict(
            release_link=dict(type='path'),
            environment_file=dict(type='path', required=True),
            user=dict(type='str', required=True),
            device_dir=dict(type='path', default='/dev'),
            group=dict(type='str'),
            home=dict(type='path'),
            shell=dict(type='path'),
            paths=dict(type='list', elements='path', default=[]),
            units=dict(type='list', elements='str', default=[]),
            command_timeout=dict(type='int', default=60),
        ),
        supports_check_mode=True,
    )
    run = module_runner(module, module.params['command_timeout']) if module.params['units'] else None
    try:
        result = read(Host(), module.params, module.check_mode, run=run)
    except (IOError, OSError) as exc:
        module.fail_json(msg='reading the host: %s' % exc)
    except CommandTimeout as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
