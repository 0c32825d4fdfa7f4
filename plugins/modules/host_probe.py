#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_probe
short_description: Read the paths, interpreters and files a role's input checks judge, in one call
version_added: 0.1.0
description:
  - Reads, and never changes, what a role's validate entry point must see of a host before its input is
    judged on the controller, all at once. Paths as M(ansible.builtin.stat) gives them, reduced to C(exists), C(isreg),
    C(isdir), C(islnk), C(executable) and C(lnk_source); the answers of interpreters asked for their version;
    files as M(ansible.builtin.slurp) gives them. One call instead of a remote task per probe.
  - A command runs only when the stat it names is of an executable regular file at an absolute path, under
    coreutils' C(timeout) bounded by O(command_timeout); otherwise it is reported as skipped.
  - Says whether the task runs in check mode, whichever way check mode was asked for (C(--check) or the
    C(check_mode) keyword), which C(ansible_check_mode) alone does not.
options:
  stats:
    description:
      - Paths to look at, by name; each a mapping with C(path) (an empty one is reported as skipped) and
        C(follow) (default true; false reports a link itself).
    type: dict
    default: {}
  commands:
    description:
      - Commands to run, by name; each a mapping with C(argv) (a list, its first item the executable) and C(stat),
        the name of the entry of O(stats) that must show that executable.
    type: dict
    default: {}
  files:
    description: Files to read, by name (a path; an empty one is not read).
    type: dict
    default: {}
  command_timeout:
    description: Seconds each command may take before it is killed.
    type: int
    default: 60
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.attributes.read_only
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Look at the interpreter and ask it for its version
  inferops.gpu.host_probe:
    stats:
      python: {path: /usr/bin/python3}
      ml_env_path: {path: /opt/ml-env, follow: false}
    commands:
      python_version: {argv: [/usr/bin/python3, -I, -c, "import sys; print(sys.version_info[0])"], stat: python}
    files:
      pins: /opt/ml-env/.ml_env/pins.json
  register: probe
"""

RETURN = r"""
check_mode:
  description: Whether this task ran in check mode.
  returned: always
  type: bool
  sample: false
stats:
  description: For each of O(stats), a mapping with C(stat) as M(ansible.builtin.stat) gives it, or C(skipped) true.
  returned: always
  type: dict
  sample: {python: {stat: {exists: true, isreg: true, isdir: false, islnk: false, executable: true}}}
commands:
  description: For each of O(commands), its C(rc), C(stdout) and C(stderr) (stripped), or C(skipped) true.
  returned: always
  type: dict
  sample: {python_version: {rc: 0, stdout: "3.11", stderr: ""}}
files:
  description: For each of O(files), its C(content) in base64, or C(failed) true and C(msg).
  returned: always
  type: dict
  sample: {pins: {content: eyJsb2NrIjogIiJ9}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils._common.host_probe import Host, probe


def shape_problems(params):
    """What is wrong with the shape of the options (their values are free-form mappings)."""
    problems = []
    for name, spec in params['stats'].items():
        if not isinstance(spec, dict) or not isinstance(spec.get('path', ''), str) \
                or not isinstance(spec.get('follow', True), bool):
            problems.append('stats.%s must be a mapping with a string path and a boolean follow' % name)
    for name, spec in params['commands'].items():
        if not isinstance(spec, dict) or not isinstance(spec.get('argv'), list) \
                or not all(isinstance(item, str) for item in spec['argv']) or spec.get('stat') not in params['stats']:
            problems.append('commands.%s must be a mapping with argv (a list of strings) and stat (a name of stats)' % name)
    for name, path in params['files'].items():
        if not isinstance(path, str):
            problems.append('files.%s must be a path' % name)
    if params['command_timeout'] < 1:
        problems.append('command_timeout must be at least 1 (got %s)' % params['command_timeout'])
    return problems


def main():
    module = AnsibleModule(
        argument_spec=dict(
            stats=dict(type='dict', default={}),
            commands=dict(type='dict', default={}),
            files=dict(type='dict', default={}),
            command_timeout=dict(type='int', default=60),
        ),
        supports_check_mode=True,
    )
    problems = shape_problems(module.params)
    if problems:
        module.fail_json(msg='; '.join(problems))
    run = module_runner(module, module.params['command_timeout']) if module.params['commands'] else None
    try:
        result = probe(Host(), run, module.params, module.check_mode)
    except CommandTimeout as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
