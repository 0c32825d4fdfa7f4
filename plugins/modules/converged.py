#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: converged
short_description: Record a node's converged state, and tell whether the node still is what it records
version_added: 0.1.0
description:
  - With O(state=checked) (read-only), reads the record of the node's last converge and compares it with O(digest)
    and with the node now. RV(converged) is true when the digest is the same and every recorded path, unit, GPU,
    release and the health URL still match; RV(drift) says what differs otherwise. C(site.yml) skips the roles on a
    converged node (its fast path), so a no-op run costs one module run per host.
  - Per role, when the record holds O(digests) and O(owners), RV(pending) names the roles a node that is not converged
    goes through, in data-flow order, from the first role whose own input or managed paths drifted (the units count
    as the server's, the release as C(ml_env)'s), always with C(gpu_health) before C(sglang_server). Drift no one role
    owns (the GPUs, the server's health, a path of no role, a record without O(digests)) names every role. RV(facts)
    are the facts the roles left out published at their last converge, for the roles that run after them.
  - With O(state=recorded), writes the record (mode 0600) after a converge passed its gates. It holds O(digest), the spec
    (O(paths), O(units), O(releases), O(health_url), O(gpu_dir)) and what the node has now. A small file is kept
    by SHA-256, a file over 1 MiB by size and mtime, a link by its target, a directory by mode and owner, a path
    that is not there as absent. An unchanged record is not rewritten.
  - With O(state=absent), removes the record, so the next run sends the node through the roles.
  - A run that fails half way leaves the record of the last converge as it was; whatever that run changed of the
    recorded paths, units or release is drift to the next check, and a changed input is a changed digest.
  - The digest comes from the action plugin of the same name when O(digest) is empty. It is an HMAC-SHA256, keyed
    with the controller's fast-path key (C(inferops_fast_path_key_file)), over the collection's code, the values of
    the variables named C(inferops_*), C(cuda_toolkit_*), C(ml_env_*), C(runtime_env_*), C(gpu_health_*),
    C(sglang_server_*) and C(rolling_*) as Ansible resolves them for the host (the host's and C(-e) values over the
    roles' defaults, the roles' vars over both, every template rendered, so that a variable that refers to another, a
    vaulted secret, a group's members), except those that only steer a run (C(inferops_fast_path), C(rolling_serial)
    and the like), and the content of the lock file each of C(ml_env_profiles) names. No value is stored or
    returned, only the keyed digest.
  - A variable whose value is known only when the roles run (it reads a gathered fact, a registered result, or
    its template fails on the controller) is never taken as unchanged, it is RV(drift) of the role it belongs to.
    The facts the roles' own defaults read (the distribution, its version, the architecture) are compared on the
    node with the record.
options:
  state:
    description: V(checked) compares; V(recorded) writes the record; V(absent) removes it.
    type: str
    choices: [checked, recorded, absent]
    default: checked
  path:
    description: The record.
    type: path
    default: /var/lib/inferops/converged.json
  digest:
    description:
      - The digest of the input. Empty computes it on the controller (action plugin) from this task's variables.
      - With O(state=recorded), pass the RV(digest) the run's O(state=checked) task returned, computed before the
        roles set their facts.
    type: str
    default: ''
  paths:
    description: With O(state=recorded), the absolute paths the converge manages (files, links, directories).
    type: list
    elements: path
    default: []
  units:
    description: With O(state=recorded), systemd units whose active and enabled states are kept.
    type: list
    elements: str
    default: []
  releases:
    description:
      - With O(state=recorded), links to ml-env releases (C(ml_env_path)). A check runs the release's own
        interpreter over its RECORD files, as C(inferops.gpu.ml_env_release) does, and needs its C(.verified) marker.
    type: list
    elements: path
    default: []
  health_url:
    description:
      - With O(state=recorded), a URL that must answer 200 (the server's C(/health)); empty checks none.
      - Given, it must answer 200 and every unit of O(units) must be active when the record is written, or nothing
        is recorded and the task fails (a server that crashed after its gate is no converge).
    type: str
    default: ''
  digests:
    description:
      - Each role's own digest, by role. With O(state=checked) the action plugin computes them with O(digest); with
        O(state=recorded), pass the RV(digests) the run's O(state=checked) task returned.
    type: dict
    default: {}
  owners:
    description: With O(state=recorded), the paths each role manages, by role (each a list of absolute paths).
    type: dict
    default: {}
  facts:
    description:
      - With O(state=recorded), the facts each role published, by role. Through the action plugin, a list of fact
        names per role, whose values it reads from the run; the module takes the values, by name, per role.
    type: dict
    default: {}
  gpu_dir:
    description: With O(state=recorded), where the NVIDIA driver lists its GPUs and version (procfs).
    type: path
    default: /proc/driver/nvidia
  timeout:
    description: Seconds for each command (systemctl, the release check) and for the health request.
    type: int
    default: 60
  unresolved:
    description:
      - With O(state=checked), the variables whose value cannot be known before the roles run, each with why (a
        template that reads a gathered fact, a registered result, or fails), by name. The action plugin fills it.
        Each is drift of the role it belongs to (by its prefix; C(inferops_*) and C(rolling_*) of every role).
    type: dict
    default: {}
attributes:
  action:
    support: full
    details: The action plugin computes O(digest) on the controller when it is empty.
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: O(state=checked) only reads; O(state=recorded) and O(state=absent) report what they would change.
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Compare the node with the record of its last converge
  inferops.gpu.converged:
    state: checked
  register: node

- name: Record the converged node
  inferops.gpu.converged:
    state: recorded
    digest: "{{ node.digest }}"
    paths: [/etc/systemd/system/sglang-server.service, /etc/sglang/sglang-server.yaml, /opt/ml-env]
    units: [sglang-server.service]
    releases: [/opt/ml-env]
    health_url: http://127.0.0.1:30000/health
"""

RETURN = r"""
converged:
  description: With O(state=checked), whether the node is what its record says and the digest is the same.
  returned: state is checked
  type: bool
drift:
  description: With O(state=checked), what differs (empty when converged), cheapest reads first.
  returned: state is checked
  type: list
  elements: str
  sample: ["/etc/inferops/runtime-env.env: its content changed"]
digest:
  description: The digest compared or recorded.
  returned: always
  type: str
digests:
  description: Each role's own digest, by role (empty when the module ran without the action plugin).
  returned: always
  type: dict
pending:
  description: With O(state=checked), the roles the node goes through, in order (empty when converged).
  returned: state is checked
  type: list
  elements: str
  sample: [gpu_health, sglang_server]
facts:
  description: With O(state=checked), the facts that the roles not in RV(pending) published at the last converge, by name.
  returned: state is checked
  type: dict
  sample: {ml_env_release: /opt/ml-env-releases/ci-a-1f2e3d4c5b6a-py3.11}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import open_url

from ansible_collections.inferops.gpu.plugins.module_utils.fleet import converged
from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import replace_bytes
from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env import release as ml_env_release


def http_status(url, timeout):
    """(status or None, why): the server is local, so no proxy."""
    try:
        return open_url(url, timeout=timeout, use_proxy=False, validate_certs=False,
                        follow_redirects='none').getcode(), ''
    except HTTPError as exc:
        return exc.code, ''
    except (URLError, OSError, ValueError) as exc:
        return None, str(getattr(exc, 'reason', exc))
    except Exception as exc:  # pylint: disable=broad-except
        return None, '%s: %s' % (type(exc).__name__, exc)


def release_checker(run_command):
    releases = ml_env_release.Host(run_command)

    def integrity(release):
        if not ml_env_release.is_trusted(releases, release):
            return ml_env_release.NO_MARKER
        damaged, broken = releases.integrity(release)
        if broken:
            return broken
        if damaged:
            return 'files differ from their RECORD in %s' % ', '.join(item['name'] for item in damaged)
        return ''
    return integrity


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', default='checked', choices=['checked', 'recorded', 'absent']),
            path=dict(type='path', default='/var/lib/inferops/converged.json'),
            digest=dict(type='str', default='', no_log=False),
            paths=dict(type='list', elements='path', default=[]),
            units=dict(type='list', elements='str', default=[]),
            releases=dict(type='list', elements='path', default=[]),
            health_url=dict(type='str', default=''),
            digests=dict(type='dict', default={}),
            owners=dict(type='dict', default={}),
            facts=dict(type='dict', default={}),
            gpu_dir=dict(type='path', default='/proc/driver/nvidia'),
            timeout=dict(type='int', default=60),
            unresolved=dict(type='dict', default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params['state'] != 'absent' and not params['digest']:
        module.fail_json(msg='digest: required with state=%s (the action plugin computes it when the task runs '
                             'through Ansible; with state=recorded pass the digest state=checked returned)' % params['state'])
    run_command = module_runner(module, params['timeout'], option='timeout')
    host = converged.Host(run_command, http_status, release_checker(run_command))
    result = dict(changed=False, digest=params['digest'], digests=params['digests'])
    try:
        if params['state'] == 'checked':
            result.update(converged.check(host, params['path'], params['digest'], params['timeout'],
                                          params['digests'], params['unresolved']))
            result['msg'] = 'converged: nothing to do' if result['converged'] else \
                'not converged: %s' % '; '.join(result['drift'])
        elif params['state'] == 'absent':
            result['changed'] = os.path.lexists(params['path'])
            if result['changed'] and not module.check_mode:
                os.remove(params['path'])
        else:
            problems = converged.spec_problems(params)
            if problems:
                module.fail_json(msg='; '.join(problems))
            record = converged.build_record(host, params['digest'], params, params['digests'], params['owners'],
                                            params['facts'])
            unfit = converged.not_serving(host, record, params['timeout'])
            if unfit:
                module.fail_json(msg='not recorded as converged, the node does not serve: %s' % '; '.join(unfit),
                                 problems=unfit)
            result['changed'] = converged.record_changes(host, params['path'], record)
            if result['changed'] and not module.check_mode:
                directory = os.path.dirname(params['path'])
                if not os.path.isdir(directory):
                    os.makedirs(directory, 0o755)
                owner = (0, 0) if os.geteuid() == 0 else (None, None)
                replace_bytes(params['path'], (converged.dumps(record) + '\n').encode('utf-8'), 0o600, *owner)
    except CommandTimeout as exc:
        module.fail_json(msg=str(exc))
    except (IOError, OSError) as exc:
        module.fail_json(msg='%s: %s' % (type(exc).__name__, exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
