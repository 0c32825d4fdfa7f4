#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rolling_snapshot
short_description: Keep a node's files before a roll, and put them back in its rollback
version_added: 0.1.0
description:
  - With O(state=taken), copies every file of O(files) into O(dir) (the I(n)th as O(dir)/I(n), mode kept, owned by
    root; O(dir) is created mode 0700) and records each file's owner, group and mode, or that it is absent. A copy
    is written only when it differs from the kept one, so a snapshot of an unchanged node changes nothing. Also
    records where O(link) points and the content of O(revision_file).
  - With O(state=restored), puts every file the snapshot O(files) recorded back with its owner, group and mode,
    and removes those it recorded as absent. Files that already match are left alone.
  - One module run instead of a round trip per file, so a roll over unchanged nodes stays cheap.
options:
  state:
    description: V(taken) keeps the files; V(restored) puts them back.
    type: str
    choices: [taken, restored]
    required: true
  dir:
    description: The snapshot directory (the role's C(rolling_state_dir)/previous).
    type: path
    required: true
  files:
    description:
      - With O(state=taken), the paths to keep (absolute).
      - With O(state=restored), the records RV(files) of the snapshot, in the same order.
    type: list
    elements: raw
    required: true
  link:
    description: With O(state=taken), a symlink whose target is recorded as RV(release) (the ml-env link).
    type: path
    default: ''
  revision_file:
    description: With O(state=taken), a file whose content is recorded as RV(revision) (the revision served).
    type: path
    default: ''
attributes:
  check_mode:
    support: full
    details: Reports in RV(copied), RV(restored) and RV(removed) what it would do and changes nothing.
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
- name: Keep the server's files before the roll
  inferops.gpu.rolling_snapshot:
    state: taken
    dir: /var/lib/inferops/rolling/previous
    files: [/etc/systemd/system/sglang-server.service, /etc/sglang/sglang-server.yaml]
    link: /opt/ml-env
    revision_file: /var/log/sglang/revision
  register: snapshot

- name: Put them back
  inferops.gpu.rolling_snapshot:
    state: restored
    dir: /var/lib/inferops/rolling/previous
    files: "{{ snapshot.files }}"
"""

RETURN = r"""
files:
  description: One record per kept path, in order (what O(state=restored) takes back).
  returned: state is taken
  type: list
  elements: dict
  sample: [{path: /etc/sglang/sglang-server.yaml, exists: true, mode: "0640", uid: 0, gid: 998, pw_name: root, gr_name: sglang}]
release:
  description: The target of O(link) when it is a symlink, else empty.
  returned: state is taken
  type: str
revision:
  description: The content of O(revision_file), empty when it is absent.
  returned: state is taken
  type: str
copied:
  description: The paths whose copy was written (or would be).
  returned: state is taken
  type: list
  elements: str
restored:
  description: The paths put back (or that would be).
  returned: state is restored
  type: list
  elements: str
removed:
  description: The paths removed because the snapshot recorded them absent (or that would be).
  returned: state is restored
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils.fleet.rolling_snapshot import restore, take


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', required=True, choices=['taken', 'restored']),
            dir=dict(type='path', required=True),
            files=dict(type='list', elements='raw', required=True),
            link=dict(type='path', default=''),
            revision_file=dict(type='path', default=''),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        if params['state'] == 'taken':
            bad = [path for path in params['files'] if not isinstance(path, str) or not path.startswith('/')]
            if bad:
                module.fail_json(msg='files: every path must be absolute (got %s)' % ', '.join(map(repr, bad)))
            result = take(params['dir'], params['files'], params['link'], params['revision_file'], module.check_mode)
        else:
            bad = [entry for entry in params['files'] if not isinstance(entry, dict) or 'path' not in entry]
            if bad:
                module.fail_json(msg='files: with state=restored, the records a state=taken run returned (got %r)' % bad[0])
            result = restore(params['dir'], params['files'], module.check_mode)
    except (OSError, ValueError) as err:
        module.fail_json(msg='%s: %s' % (params['state'], err))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
