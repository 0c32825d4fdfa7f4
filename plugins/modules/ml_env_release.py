#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ml_env_release
short_description: Keep the releases of an ml-env venv (trust, build bookkeeping, atomic switch, prune, rollback)
version_added: 0.1.0
description:
  - Manages the layout the M(inferops.gpu.ml_env) role builds into. O(path) is a symlink to the current release
    O(root)C(/releases/<name>); O(root)C(/previous) names the release it replaced; a release is trusted only when its
    C(.verified) marker holds its name, written after verification passed, and its interpreter is there.
  - The module does not install or verify packages; the role runs the installer and M(inferops.gpu.ml_env_check)
    between the calls. The same module call makes a ready release current and tells the role what is left to do
    (RV(next)).
  - With O(state=present), reads the layout. A trusted release has its installed files compared with their
    C(RECORD) (the release's own interpreter runs the check; only files changed since the marker was written are
    hashed); an interpreter that does not run makes it untrusted. A trusted, intact release (or, with O(rollback),
    the verified and intact previous release) gets O(site_files), becomes current and the old releases are pruned,
    all in this one call. An untrusted release is prepared for a build (any leftover of a build that never passed
    verification is removed) and RV(next) is V(build); a trusted release with damaged files gives V(repair) and
    RV(damaged).
  - With O(state=staged), writes O(site_files) into the release being built, before it is verified.
  - With O(state=verified), after verification passed, keeps O(report) as C(.ml_env/verify.json), writes the marker,
    makes the release current and prunes.
  - With O(state=absent), removes a release whose build or verification failed; never the current one.
  - The switch records the release being replaced as O(root)C(/previous) first, then renames a new link over
    O(path) (one rename(2) system call), so O(path) always names a whole release.
  - Pruning keeps O(keep) releases (the current one, the previous one, then the most recently verified) and
    removes every directory without a marker (a build that was killed).
options:
  state:
    description:
      - V(present) decides and, when the release is ready, makes it current.
      - V(staged) writes O(site_files) into the release before verification.
      - V(verified) marks the release verified and makes it current.
      - V(absent) removes the release after a failed build.
    type: str
    choices: [present, staged, verified, absent]
    default: present
  root:
    description: Directory of the releases and of the C(previous) link (C(ml_env_root)).
    type: path
    required: true
  path:
    description: The symlink to the current release (C(ml_env_path)). Must not exist as anything but a symlink.
    type: path
    required: true
  release:
    description: Name of the release, a plain file name (the role uses the first 12 hex digits of the pin set's hash).
    type: str
    required: true
  rollback:
    description:
      - With O(state=present), make the previous release current instead of O(release); the release replaced becomes
        the previous one, so rolling back twice returns.
      - Refused, changing nothing, when the previous release is not verified or its files differ from their RECORD.
    type: bool
    default: false
  keep:
    description: Verified releases to keep; at least 1.
    type: int
    default: 3
  site_packages:
    description: The release's site-packages directory relative to the release, for example C(lib/python3.12/site-packages).
    type: str
    default: ''
  site_files:
    description: Files written into the site-packages of the release that is to be current (runtime_env's start-up hook).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Relative to O(site_packages); no C(..).
        type: str
        required: true
      content:
        description: The file's text.
        type: str
        required: true
  report:
    description: With O(state=verified), the verification result kept as C(.ml_env/verify.json).
    type: dict
    default: {}
  command_timeout:
    description: Seconds the integrity check (the release's interpreter reading its RECORDs) may run before it is killed.
    type: int
    default: 3600
attributes:
  check_mode:
    support: full
    details: Reads everything (the integrity check included) and reports in RV(actions) what it would do; RV(next) stays empty.
  diff_mode:
    support: full
    details: The links and the releases before and after; in check mode the actions it would take.
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Read the releases and make the release current when it is ready
  inferops.gpu.ml_env_release:
    root: /opt/ml-env.d
    path: /opt/ml-env
    release: 0123456789ab
    site_packages: lib/python3.12/site-packages
  register: ml_release

- name: After building and verifying it, mark it verified and make it current
  inferops.gpu.ml_env_release:
    state: verified
    root: /opt/ml-env.d
    path: /opt/ml-env
    release: 0123456789ab
    report: "{{ verification }}"
  when: ml_release.next == 'build'

- name: Go back to the previous release
  inferops.gpu.ml_env_release:
    root: /opt/ml-env.d
    path: /opt/ml-env
    release: 0123456789ab
    rollback: true
"""

RETURN = r"""
release:
  description: The release that is (or, with RV(next) set or in check mode, is to be) current.
  returned: always
  type: str
  sample: /opt/ml-env.d/releases/0123456789ab
previous:
  description: The release C(previous) names afterwards, empty when none.
  returned: always
  type: str
  sample: /opt/ml-env.d/releases/ba9876543210
current:
  description: What O(path) pointed at before the call, empty when it did not exist.
  returned: always
  type: str
  sample: /opt/ml-env.d/releases/ba9876543210
next:
  description: What the caller must do before calling again with O(state=verified). V(build), V(repair) or empty.
  returned: always
  type: str
  sample: build
trusted:
  description: Whether the target release was trusted as it was found.
  returned: when O(state=present)
  type: bool
damaged:
  description: The release's distributions whose files differ from their RECORD, each with C(name), C(version), C(files).
  returned: always
  type: list
  elements: dict
  sample:
    - {name: six, version: 1.17.0, files: [six.py]}
actions:
  description: What the call did (in check mode, would do), one sentence each.
  returned: always
  type: list
  elements: str
  sample:
    - point /opt/ml-env.d/previous at /opt/ml-env.d/releases/ba9876543210
    - point /opt/ml-env at /opt/ml-env.d/releases/0123456789ab
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.release import (
    Host,
    Layout,
    ReleaseError,
    describe,
    option_problems,
    run,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', default='present', choices=['present', 'staged', 'verified', 'absent']),
            root=dict(type='path', required=True),
            path=dict(type='path', required=True),
            release=dict(type='str', required=True),
            rollback=dict(type='bool', default=False),
            keep=dict(type='int', default=3),
            site_packages=dict(type='str', default=''),
            site_files=dict(type='list', elements='dict', default=[], options=dict(
                path=dict(type='str', required=True),
                content=dict(type='str', required=True),
            )),
            report=dict(type='dict', default={}),
            command_timeout=dict(type='int', default=3600),
        ),
        supports_check_mode=True,
    )
    params = module.params
    problems = option_problems(params)
    if problems:
        module.fail_json(msg='; '.join(problems))
    run_command = module_runner(module, params['command_timeout'])
    host = Host(run_command, owner=(0, 0) if os.geteuid() == 0 else None)
    layout = Layout(params['root'], params['path'])
    before = describe(host, layout)
    try:
        result = run(host, layout, params, check_mode=module.check_mode)
    except (ReleaseError, CommandTimeout) as exc:
        module.fail_json(msg=str(exc))
    except (IOError, OSError) as exc:
        module.fail_json(msg='%s: %s' % (type(exc).__name__, exc))
    # Ansible shows a diff only under --diff; computing it is one directory listing.
    if result['changed']:
        if module.check_mode:
            result['diff'] = dict(prepared='\n'.join(result['actions']) + '\n')
        else:
            result['diff'] = dict(before=before, after=describe(host, layout))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
