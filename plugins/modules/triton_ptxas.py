#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: triton_ptxas
short_description: Prove which ptxas Triton assembles each GPU architecture with
version_added: 0.2.0
description:
  - Compiles a tiny Triton kernel ahead of time for every architecture in O(archs), in the interpreter
    O(python) (a release venv) and a fresh Triton cache, so Triton must run ptxas; no GPU is needed.
  - For each architecture it compares the ptxas Triton resolved for that target (its path and
    C(release X.Y)) and the PTX ISA Triton wrote with the toolkit's O(ptxas). Triton 3.6 and later
    read C(TRITON_PTXAS_BLACKWELL_PATH) for compute capability 10.0 and up and C(TRITON_PTXAS_PATH)
    below; both fall back to Triton's bundled ptxas, silently, when unset or not runnable.
  - The probe runs without C(TRITON_PTXAS_PATH) and C(TRITON_PTXAS_BLACKWELL_PATH) in its
    environment, so what it proves is what the venv's start-up hook (the runtime_env role) gives
    every process.
  - Architectures below sm_75 are reported as not supported and not compiled.
  - A venv without Triton passes with RV(triton) empty; there is nothing to prove.
  - Changes nothing (the cache is a temporary directory); C(changed) is always V(false).
options:
  python:
    description: The interpreter of the venv to prove, an absolute path.
    type: path
    required: true
  ptxas:
    description: The toolkit's ptxas, an absolute path; Triton must resolve this file for every architecture.
    type: path
    required: true
  archs:
    description: Architectures, as C(sm_XX) with an optional C(a) or C(f) suffix.
    type: list
    elements: str
    default: [sm_90, sm_100, sm_120]
  command_timeout:
    description: Seconds each command (the probe, C(ptxas --version)) may run before it is killed and the module fails naming it.
    type: int
    default: 300
notes:
  - The runtime_env role runs it after it rendered the environment, when the toolkit's ptxas is known.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.attributes.read_only
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Prove that Triton assembles with CUDA 13.0's ptxas for Hopper and Blackwell
  inferops.gpu.triton_ptxas:
    python: /opt/ml-env/bin/python
    ptxas: /usr/local/cuda-13.0/bin/ptxas
    archs: [sm_90, sm_120]
"""

RETURN = r"""
triton:
  description: Triton's version in the venv; empty when the venv has no Triton.
  returned: always
  type: str
  sample: 3.6.0
ptxas_release:
  description: The toolkit ptxas's release, C(major.minor).
  returned: always
  type: str
  sample: "13.0"
archs:
  description: One entry per architecture (repeats of a compute capability dropped).
  returned: always
  type: list
  elements: dict
  sample:
    - arch: sm_120
      capability: 120
      variable: TRITON_PTXAS_BLACKWELL_PATH
      supported: true
      ptxas: /usr/local/cuda-13.0/bin/ptxas
      ptxas_release: "13.0"
      ptx_version: "9.0"
      ok: true
  contains:
    arch:
      description: The architecture as given.
      type: str
    capability:
      description: Its compute capability as Triton numbers it (major * 10 + minor).
      type: int
    variable:
      description: The variable this Triton reads for the target.
      type: str
    supported:
      description: Whether the architecture was compiled (sm_75 and up).
      type: bool
    ptxas:
      description: The ptxas Triton resolved for the target.
      type: str
    ptxas_release:
      description: That ptxas's release as Triton parsed it.
      type: str
    ptx_version:
      description: The PTX ISA of the kernel Triton wrote.
      type: str
    ok:
      description: Whether the toolkit's ptxas assembled it.
      type: bool
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.cuda_toolkit.toolkit import absolute_error, archs_errors, parse_release
from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env.triton_ptxas import (
    PROBE_SOURCE, capabilities, judge, parse_answer, probe_argv,
)


def argument_errors(params):
    errors = [absolute_error('python', params['python']), absolute_error('ptxas', params['ptxas'])]
    return [error for error in errors if error] + archs_errors('archs', params['archs'])


def prove(module, run_command):
    params = module.params
    result = dict(changed=False, triton='', ptxas_release='', archs=[])

    def fail(msg, **more):
        module.fail_json(msg=msg, **dict(result, **more))

    if not os.access(params['python'], os.X_OK):
        fail('python = %s is not an executable file' % params['python'])
    try:
        # The probe first: a venv without Triton has nothing to prove, whatever the toolkit.
        work = tempfile.mkdtemp(prefix='triton-ptxas-', dir=module.tmpdir)
        script = os.path.join(work, 'probe.py')
        with open(script, 'w') as handle:
            handle.write(PROBE_SOURCE)
        request = os.path.join(work, 'request.json')
        with open(request, 'w') as handle:
            handle.write(module.jsonify({'capabilities': [cap for arch, cap in capabilities(params['archs'])]}))
        rc, out, err = run_command(probe_argv(params['python'], script, request))
        answer = parse_answer(out)
        if answer is None:
            fail('the Triton probe in %s gave no answer (rc=%s): %s' % (params['python'], rc, (err or out or '').strip()[-1500:]))
        if not answer.get('triton'):
            result['msg'] = 'no Triton in %s (%s): nothing to prove' % (params['python'], answer.get('error', ''))
            return result
        result['triton'] = answer['triton']
        if not os.access(params['ptxas'], os.X_OK):
            fail('ptxas = %s is not an executable file' % params['ptxas'])
        rc, out, err = run_command([params['ptxas'], '--version'])
    except CommandTimeout as exc:
        fail(str(exc))
    except OSError as exc:
        fail('could not run the probe: %s' % exc)
    release = parse_release(out + err)[0]
    if rc != 0 or release is None:
        fail('`%s --version` exited with %d and no release: %s' % (params['ptxas'], rc, (out + err).strip()[-500:]))
    result['ptxas_release'] = release
    result['archs'], problems = judge(answer, params['archs'], params['ptxas'], release)
    if problems:
        fail('Triton %s in %s does not assemble with the toolkit\'s ptxas: %s'
             % (answer['triton'], params['python'], '; '.join(problems)))
    proven = [entry['arch'] for entry in result['archs'] if entry['supported']]
    result['msg'] = 'Triton %s assembles %s with %s (CUDA %s)' % (
        answer['triton'], ', '.join(proven) or 'nothing', params['ptxas'], release)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type='path', required=True),
            ptxas=dict(type='path', required=True),
            archs=dict(type='list', elements='str', default=['sm_90', 'sm_100', 'sm_120']),
            command_timeout=dict(type='int', default=300),
        ),
        supports_check_mode=True,
    )
    errors = argument_errors(module.params)
    if errors:
        module.fail_json(msg='; '.join(errors))
    module.exit_json(**prove(module, module_runner(module, module.params['command_timeout'])))


if __name__ == '__main__':
    main()
