#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: managed_files
short_description: A role's directories and files, with owner, group and mode, in one call
version_added: 0.1.0
description:
  - Brings every entry of O(files), in order, to its O(files[].state), changing only what differs, in one remote
    call instead of a C(file) or C(template) task per path (a template task is two).
  - Files are replaced in one rename in their directory, with their owner, group and mode already set, so a
    reader sees the old file or the new one. A path that is a symbolic link is replaced by the file.
  - The content comes rendered from the controller, for example with C(lookup('ansible.builtin.template', ...)).
    O(files[].secret_content) is never logged and never shown in a diff.
options:
  files:
    description: The paths, in the order they are brought to their state (a directory before its files).
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: An absolute path.
        type: path
        required: true
      state:
        description:
          - V(directory) creates it (missing parents with the same owner and mode) or sets its owner and mode.
          - V(file) writes O(files[].content) or O(files[].secret_content) when the file differs.
          - V(touch) creates an empty file when there is none and leaves the content and times of one there.
          - V(absent) removes the path (a directory with what it holds).
        type: str
        choices: [directory, file, touch, absent]
        default: file
      owner:
        description: The owner's name.
        type: str
        default: root
      group:
        description: The group's name.
        type: str
        default: root
      mode:
        description: The octal mode, for example C(0644).
        type: str
        default: '0644'
      content:
        description: What the file holds (O(files[].state=file)); shown in a diff.
        type: str
      secret_content:
        description: What the file holds when it holds a secret; never logged, never in a diff.
        type: str
attributes:
  check_mode:
    support: full
    details: Reports in RV(changed_paths) what would change. An owner or group a task before would create counts as a change.
  diff_mode:
    support: partial
    details: The content before and after of each changed file given O(files[].content); none for secret content.
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Write the server's directories, configuration and unit
  inferops.gpu.managed_files:
    files:
      - {path: /etc/sglang, state: directory, mode: "0755"}
      - {path: /var/log/sglang/server.log, state: touch, group: sglang, mode: "0640"}
      - path: /etc/sglang/config.yaml
        owner: sglang
        group: sglang
        mode: "0600"
        secret_content: "{{ lookup('ansible.builtin.template', 'config.yaml.j2') }}"
      - path: /etc/systemd/system/sglang-server.service
        content: "{{ lookup('ansible.builtin.template', 'unit.j2') }}"
  register: written
"""

RETURN = r"""
changed_paths:
  description: The paths that were (in check mode, would be) created, written, removed or given their owner and mode.
  returned: always
  type: list
  elements: str
  sample: [/etc/systemd/system/sglang-server.service]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.managed_files import Filesystem, ManagedFilesError, run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type='list', elements='dict', required=True, options=dict(
                path=dict(type='path', required=True),
                state=dict(type='str', default='file', choices=['directory', 'file', 'touch', 'absent']),
                owner=dict(type='str', default='root'),
                group=dict(type='str', default='root'),
                mode=dict(type='str', default='0644'),
                content=dict(type='str'),
                secret_content=dict(type='str', no_log=True),
            )),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(Filesystem(), module.params['files'], check_mode=module.check_mode, want_diff=module._diff)
    except ManagedFilesError as exc:
        module.fail_json(msg=str(exc))
    except (IOError, OSError) as exc:
        module.fail_json(msg='%s: %s' % (getattr(exc, 'filename', None) or 'a managed path', exc))
    if not result['diff']:
        del result['diff']
    module.exit_json(**result)


if __name__ == '__main__':
    main()
