#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_args
short_description: Let the release's own SGLang parser judge the server's arguments, launching nothing
version_added: 0.1.0
description:
  - Runs O(python) (the ml-env release's interpreter) with a probe that builds SGLang's argument parser as
    C(prepare_server_args) does (C(argparse.ArgumentParser) and C(ServerArgs.add_cli_args)) and parses O(argv). It
    creates no C(ServerArgs) (whose post-init reads the model and the GPUs) and starts nothing.
  - Fails when the parser refuses the arguments, naming the variable of O(sources) that holds the word it refused,
    the word and the parser's own message; and when the release holds another sglang than O(version).
  - Skipped, with RV(why), when O(python) is not there or the release has no SGLang parser to ask (a profile without
    sglang).
options:
  python:
    description: The interpreter of the release that would serve.
    type: path
    required: true
  argv:
    description: The server's command line after C(-m sglang.launch_server), as the unit would run it.
    type: list
    elements: str
    required: true
  sources:
    description: The variables whose words are in O(argv), by name (for the message).
    type: dict
    default: {}
  version:
    description: The sglang version the role renders the arguments for; empty compares none.
    type: str
    default: ''
  other_version:
    description:
      - What a release that holds another sglang than O(version) gets. V(refuse) fails (before a start, the release
        is the one that would serve). V(skip) judges nothing and says why (the check play, where the run may build
        another release than the one there now).
    type: str
    choices: [refuse, skip]
    default: refuse
  environment:
    description:
      - Variables the probe runs with, as the server would, since the parser may read the environment. The role
        passes C(sglang_server_extra_environment) without the variables named as secrets. Not secret itself (a
        no_log option would mask each of its values, a V(1) too, wherever it appears in the output).
    type: dict
    default: {}
  command_timeout:
    description: Seconds the probe may take (its import of SGLang imports torch).
    type: int
    default: 300
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.attributes.read_only
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Let the release's SGLang parser judge the arguments before anything stops
  inferops.gpu.sglang_args:
    python: /opt/ml-env/bin/python
    argv: [--model-path, /srv/models/kimi, --tp, "8", --cuda-graph-max-bs, "64"]
    sources:
      sglang_server_args: [--tp, "8", --cuda-graph-max-bs, "64"]
    version: 0.5.9
"""

RETURN = r"""
version:
  description: The sglang version the release holds (empty when it holds none).
  returned: always
  type: str
  sample: 0.5.9
parser:
  description: Whether the release had a parser to ask.
  returned: always
  type: bool
error:
  description: What the parser said of the arguments (empty when it took them).
  returned: always
  type: str
  sample: "unrecognized arguments: --tp-sizee 8"
why:
  description: Why the arguments were not judged (empty when they were).
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.sglang import arg_check


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type='path', required=True),
            argv=dict(type='list', elements='str', required=True),
            sources=dict(type='dict', default={}),
            version=dict(type='str', default=''),
            other_version=dict(type='str', choices=['refuse', 'skip'], default='refuse'),
            environment=dict(type='dict', default={}),
            command_timeout=dict(type='int', default=300),
        ),
        supports_check_mode=True,
    )
    params = module.params
    result = dict(changed=False, version='', parser=False, error='', why='')
    if not (os.path.isfile(params['python']) and os.access(params['python'], os.X_OK)):
        result['why'] = '%s is not there: the release that would serve is not built yet' % params['python']
        module.exit_json(skipped=True, msg=result['why'], **result)
    environment = dict((str(key), str(value)) for key, value in params['environment'].items())
    run_command = module_runner(module, params['command_timeout'], environ_update=environment)
    try:
        rc, out, err = run_command(arg_check.command(params['python'], params['argv']))
    except CommandTimeout as exc:
        module.fail_json(msg=str(exc), **result)
    found = arg_check.answer(rc, out, err)
    result.update((key, found.get(key) or result[key]) for key in ('version', 'parser', 'error', 'why'))
    if params['other_version'] == 'skip' and arg_check.other_release(found, params['version']):
        result['why'] = ('the release holds sglang %s, the run serves %s: its arguments are judged before the start, '
                         'in the release that will serve them' % (result['version'], params['version']))
        module.exit_json(skipped=True, msg=result['why'], **result)
    problems = arg_check.judge(found, params['sources'], params['version'])
    if problems:
        module.fail_json(msg='; '.join(problems), problems=problems, **result)
    if not found.get('parser'):
        module.exit_json(skipped=True, msg=result['why'], **result)
    module.exit_json(msg='sglang %s takes the arguments' % result['version'], **result)


if __name__ == '__main__':
    main()
