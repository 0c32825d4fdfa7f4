#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: runtime_env_effective
short_description: Hold what a release's Python really sees, after site initialisation, against the spec
version_added: 0.3.0
description:
  - Starts O(python) as the server starts it (the unit's O(environment) and O(environment_files), O(user),
    O(working_directory)), lets site.py initialise it as it would (every C(.pth) line, C(sitecustomize),
    C(usercustomize)) while recording the file and line of every write to C(os.environ), and compares the
    values of O(expected) and the start of C(PATH) with the spec, key by key.
  - A value that differs fails, naming the variable, both values and the file and line that set it (a hand-edited
    C(sitecustomize.py) beats the runtime_env start-up hook, which only sets what a process lacks), or the unit's
    environment file and line.
  - For each library of O(libraries) it reports the file the loader resolves (C(ctypes.CDLL), then
    C(/proc/self/maps)) and fails when it is not under the directories given.
  - Variables that the start-up hooks set beyond the spec are warnings, by name and file only.
  - Only the values of the names asked for are read back, never the rest of the environment (it may hold
    secrets). The environment travels to the interpreter on stdin, never on a command line.
  - Changes nothing; C(changed) is always V(false).
options:
  python:
    description: The release's interpreter, as the unit runs it.
    type: path
    required: true
  expected:
    description: The variables the process must see, with their values (the spec's variables).
    type: dict
    default: {}
  path_prepend:
    description: The entries C(PATH) must begin with, in order.
    type: list
    elements: str
    default: []
  environment:
    description: The unit's C(Environment=) values.
    type: dict
    default: {}
  environment_files:
    description:
      - The unit's C(EnvironmentFile=) files, in order (later ones win, as in systemd). A leading C(-) makes one
        optional, as in systemd.
    type: list
    elements: str
    default: []
  base:
    description:
      - The environment the manager starts from. V(systemd) is C(PATH) (O(systemd_path)) and, with O(user),
        C(HOME), C(USER), C(LOGNAME) and C(SHELL), as systemd gives a service. V(inherit) is this module's own
        environment, as the collection's process manager passes its own on.
    type: str
    choices: [systemd, inherit]
    default: systemd
  systemd_path:
    description: The C(PATH) systemd gives a service.
    type: str
    default: /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  user:
    description: The service user (the interpreter runs through C(setpriv) as that user); empty runs as this module.
    type: str
    default: ''
  group:
    description: The service group; empty is O(user)'s name.
    type: str
    default: ''
  working_directory:
    description: The unit's working directory.
    type: path
    default: /
  libraries:
    description: Library names (sonames) to resolve, each with the directories its file must be under (none
      checks nothing but reports the file).
    type: dict
    default: {}
  command_timeout:
    description: Seconds the interpreter may take.
    type: int
    default: 120
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.attributes.read_only
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Hold what the server's Python sees against the spec
  inferops.gpu.runtime_env_effective:
    python: /opt/ml-env/bin/python
    expected:
      CUDA_HOME: /usr/local/cuda-13.0
      TRITON_PTXAS_PATH: /usr/local/cuda-13.0/bin/ptxas
    path_prepend: [/usr/local/cuda-13.0/bin]
    environment_files: [/etc/inferops/runtime-env.env]
    user: sglang
    working_directory: /var/lib/sglang
    libraries:
      libcudart.so.13: [/usr/local/cuda-13.0]
"""

RETURN = r"""
environ:
  description: The value the interpreter sees for each name of O(expected) and C(PATH) (null when unset).
  returned: when the probe answered
  type: dict
  sample: {CUDA_HOME: /usr/local/cuda-12.8, PATH: /usr/local/cuda-13.0/bin:/usr/bin}
setters:
  description: Where each of those names got its value, C(FILE line N) (a site hook or an environment file).
  returned: when the probe answered
  type: dict
  sample: {CUDA_HOME: /usr/lib/python3.12/sitecustomize.py line 3}
modules:
  description: The C(sitecustomize) and C(usercustomize) modules imported, by file (null when none).
  returned: when the probe answered
  type: dict
libraries:
  description: For each library of O(libraries), the file the loader resolved (path null and an error when none).
  returned: when the probe answered
  type: dict
  sample: {libcudart.so.13: {path: /usr/local/cuda-13.0/lib64/libcudart.so.13, error: ''}}
problems:
  description: What differs from the spec, one line each (the module fails when there is any).
  returned: always
  type: list
  elements: str
cautions:
  description: The variables the start-up hooks set beyond the spec, by name and place, one line each (also warned).
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import effective


def read_files(paths):
    """[(path, text)], a missing optional (-) file skipped as systemd skips it."""
    files = []
    for path in paths:
        optional = path.startswith('-')
        path = path[1:] if optional else path
        try:
            with open(path) as handle:
                files.append((path, handle.read()))
        except (IOError, OSError):
            if not optional:
                raise
    return files


def run(module, run_command):
    params = module.params
    result = dict(changed=False, problems=[], cautions=[])
    if not os.access(params['python'], os.X_OK):
        module.fail_json(msg='python = %s is not an executable file' % params['python'], **result)
    try:
        env, origin = effective.build_env(effective.base_environment(params['base'], params['systemd_path'], params['user']),
                                          params['environment'],
                                          read_files(params['environment_files']))
    except KeyError:
        module.fail_json(msg='user = %s: no such user on the host' % params['user'], **result)
    except (IOError, OSError) as exc:
        module.fail_json(msg='cannot read the environment file %s: %s' % (exc.filename, exc.strerror), **result)
    try:
        result.update(effective.check(run_command, params['python'], env, origin, params['working_directory'],
                                      params['expected'], params['path_prepend'], params['libraries'], params['user'],
                                      params['group'],
                                      module.get_bin_path('setpriv', required=bool(params['user'])) or 'setpriv'))
    except CommandTimeout as exc:
        module.fail_json(msg=str(exc), **result)
    except effective.ProbeError as exc:
        module.fail_json(msg=str(exc), **result)
    problems = result['problems']
    if problems:
        module.fail_json(msg='what %s sees after its start-up differs from the runtime environment\'s spec: %s'
                         % (params['python'], '; '.join(problems)), **result)
    result['msg'] = '%s sees the spec (%d variables, PATH)%s' % (
        params['python'], len(params['expected']),
        ''.join('; %s -> %s' % (name, (lib or {}).get('path')) for name, lib in sorted(result['libraries'].items())))
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type='path', required=True),
            expected=dict(type='dict', default={}),
            path_prepend=dict(type='list', elements='str', default=[]),
            environment=dict(type='dict', default={}),
            environment_files=dict(type='list', elements='str', default=[]),
            base=dict(type='str', choices=['systemd', 'inherit'], default='systemd'),
            systemd_path=dict(type='str', default='/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'),
            user=dict(type='str', default=''),
            group=dict(type='str', default=''),
            working_directory=dict(type='path', default='/'),
            libraries=dict(type='dict', default={}),
            command_timeout=dict(type='int', default=120),
        ),
        supports_check_mode=True,
    )
    result = run(module, module_runner(module, module.params['command_timeout']))
    for warning in result.get('cautions', []):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
