#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ml_env_check
short_description: Check a pinned ML stack before it is built and verify the venv built from it
version_added: 0.1.0
description:
  - With O(stage=precheck), evaluates compatibility rules over a pin set and the interpreter that will
    run the venv, before anything is built. A failed rule is reported by its name and the reason.
  - With O(stage=verify) (the default), runs the venv's own interpreter in isolated mode
    (C(-I -B), E(PYTHONNOUSERSITE=1)), compares the installed distributions with O(pins), imports each
    of O(imports) and compares the version it reports, and reports C(torch.version.cuda) and the GPU count
    when torch was imported.
  - The verify stage also runs an ELF ABI check (O(abi_check)). Every undefined dynamic symbol of the stack's
    compiled extensions (the shared objects of the pinned distributions, plus O(extension_globs)) whose C++ scope
    is one of O(abi_namespaces) must be exported by a shared library of O(abi_provider). Missing symbols are
    reported demangled, with the library that needs them and what the provider exports under the same name.
  - Never changes anything on the target; C(changed) is always V(false).
options:
  stage:
    description:
      - V(precheck) evaluates O(rules) over O(pins), O(cuda_version) and the version of O(python).
      - V(verify) examines the venv whose interpreter is O(python).
    type: str
    choices: [precheck, verify]
    default: verify
  python:
    description:
      - The interpreter of the venv to verify, or with O(stage=precheck) the interpreter the venv will be built from.
    type: path
    required: true
  pins:
    description:
      - Distribution name to the exact version that must be installed.
    type: dict
    default: {}
  imports:
    description:
      - Import packages to import, in this order, and the version each must report.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Import name, for example V(sgl_kernel).
        type: str
        required: true
      version:
        description:
          - Version the import must report. V(2.9.*) matches a release prefix, V(0.3.21) that public
            version with any local label, V(2.9.1+cu130) exactly. Not set means the import only has to succeed.
        type: str
      attribute:
        description: Module attribute holding the version.
        type: str
        default: __version__
  rules:
    description:
      - Compatibility rules for O(stage=precheck). Each names itself in a failure.
      - A rule without the fields of its kind fails, naming the rule, its kind and the missing field.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Name of the rule, reported when it fails.
        type: str
        required: true
      kind:
        description:
          - V(same_version) O(rules[].packages) must carry the same version when pinned.
          - V(requires) O(rules[].package) pinned at O(rules[].version) needs O(rules[].needs).
          - V(cuda_local_tag) every C(+cuXYZ) local version label must name the major of O(cuda_version).
          - V(cuda_major) O(rules[].major) must be the major of O(cuda_version).
          - V(python_version) the major.minor of O(python) must be one of O(rules[].versions).
          - V(newer_than) each of O(rules[].packages) that is pinned must be newer than the release O(rules[].version),
            as PEP 440's C(>version) (a post-release or local label of that release is not newer). The ml_env role's
            checks also judge the profile's overrides and its lock with these rules.
        type: str
        required: true
        choices: [same_version, requires, cuda_local_tag, cuda_major, python_version, newer_than]
      packages:
        description: Distributions of a V(same_version) or a V(newer_than) rule.
        type: list
        elements: str
      require_all:
        description: For V(same_version), pinning only some of O(rules[].packages) fails too.
        type: bool
        default: false
      package:
        description: Distribution a V(requires) rule is about.
        type: str
      version:
        description:
          - Version pattern of O(rules[].package) the V(requires) rule applies to. Not set means any.
          - The release a V(newer_than) rule's packages must be newer than, for example V(2.26.2).
        type: str
      needs:
        description: What a V(requires) rule needs.
        type: dict
        suboptions:
          package:
            description: Distribution that must be pinned.
            type: str
            required: true
          version:
            description: Version pattern it must be pinned at.
            type: str
            required: true
      major:
        description: CUDA major a V(cuda_major) rule expects.
        type: str
      versions:
        description: Python C(major.minor) versions a V(python_version) rule allows.
        type: list
        elements: str
      why:
        description: Why the rule exists. Documentation only.
        type: str
  cuda_version:
    description:
      - The CUDA toolkit version, for example V(13.0). Used by the CUDA rules, and by O(stage=verify) to
        require that torch's CUDA build has the same major. Not set skips those checks.
      - Numbers separated by dots; anything else fails before the target is examined.
    type: str
  abi_check:
    description: Run the ELF ABI check in the verify stage. Needs C(nm) and C(c++filt) (binutils) on the target.
    type: bool
    default: true
  abi_namespaces:
    description: Outermost C++ namespaces whose imported symbols must be exported by O(abi_provider).
    type: list
    elements: str
    default: [c10, at, torch]
  abi_provider:
    description: Import package whose shared libraries (C(lib/*.so*) and C(*.so) in its directory) export those symbols.
    type: str
    default: torch
  extension_globs:
    description:
      - More shared objects to check, as globs relative to each directory on the venv's C(sys.path)
        or absolute, for example V(torch/_C*.so) to check torch's own extension modules.
    type: list
    elements: str
    default: []
  require_gpu:
    description: Fail the verify stage when torch sees no GPU.
    type: bool
    default: false
  command_timeout:
    description:
      - Seconds any one command (the interpreter, the probe, C(nm), C(c++filt)) may run before it is killed
        and the module fails naming it. The probe imports the whole stack, which takes a while on a cold disk.
    type: int
    default: 600
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.attributes.read_only
requirements:
  - C(nm) and C(c++filt) from binutils on the target for the ABI check.
notes:
  - The ABI check reads symbol tables only; it loads nothing. Imports do load the extensions, so an
    C(undefined symbol) shows up both as a failed import and, with the demangled name, as an ABI problem.
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Check the pin set before building anything
  inferops.gpu.ml_env_check:
    stage: precheck
    python: /usr/bin/python3
    cuda_version: "13.0"
    pins:
      torch: 2.9.1+cu130
      sgl-kernel: 0.3.21+cu130
    rules:
      - name: sgl-kernel-0.3.21-needs-torch-2.9
        kind: requires
        package: sgl-kernel
        version: 0.3.21
        needs: {package: torch, version: "2.9.*"}
      - name: cuda-local-tag-matches-toolkit
        kind: cuda_local_tag
      - name: nccl-newer-than-2.26.2
        kind: newer_than
        packages: [nvidia-nccl-cu12, nvidia-nccl-cu13]
        version: 2.26.2

- name: Verify a release venv
  inferops.gpu.ml_env_check:
    python: /opt/ml-env.d/releases/0123456789ab/bin/python
    cuda_version: "13.0"
    pins:
      torch: 2.9.1+cu130
      sgl-kernel: 0.3.21+cu130
    imports:
      - {name: torch, version: 2.9.1+cu130}
      - {name: sgl_kernel, version: 0.3.21}
  register: check

- name: Check torch's own extension modules in a venv that uses the host's torch
  inferops.gpu.ml_env_check:
    python: /opt/ml-env/bin/python
    imports: [{name: torch}]
    extension_globs: [torch/_C*.so, torch/lib/libtorch_python.so]
"""

RETURN = r"""
stage:
  description: The stage that ran.
  returned: always
  type: str
  sample: verify
python_version:
  description: Version of O(python).
  returned: always
  type: str
  sample: 3.12.3
problems:
  description: Everything that failed, one sentence each. Empty when the check passed.
  returned: always
  type: list
  elements: str
  sample:
    - >-
      /opt/ml-env.d/releases/0123456789ab/lib/python3.12/site-packages/sgl_kernel/common_ops.abi3.so needs
      c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool), which torch does not export
      (it exports c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, unsigned int, bool))
rules:
  description: One entry per rule of the precheck.
  returned: when O(stage=precheck)
  type: list
  elements: dict
  sample:
    - {name: sgl-kernel-0.3.21-needs-torch-2.9, kind: requires, ok: false,
       message: "sgl-kernel 0.3.21+cu130 needs torch 2.9.*; the pin set has torch 2.10.0+cu130"}
prefix:
  description: C(sys.prefix) of the venv.
  returned: when O(stage=verify)
  type: str
  sample: /opt/ml-env.d/releases/0123456789ab
packages:
  description: One entry per pin with C(name), C(expected), C(installed) (V(null) when missing) and C(ok).
  returned: when O(stage=verify)
  type: list
  elements: dict
  sample:
    - {name: torch, expected: 2.9.1+cu130, installed: 2.9.1+cu130, ok: true}
imports:
  description: One entry per import with C(name), C(expected), C(version), C(error) and C(ok).
  returned: when O(stage=verify)
  type: list
  elements: dict
  sample:
    - {name: sgl_kernel, expected: 0.3.21, version: null, ok: false,
       error: "ImportError: .../common_ops.abi3.so: undefined symbol: _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"}
torch_cuda:
  description: C(torch.version.cuda), V(null) when torch was not imported or is a CPU build.
  returned: when O(stage=verify)
  type: str
  sample: "13.0"
gpu_count:
  description: GPUs torch can use, V(0) without any, V(null) when torch was not imported.
  returned: when O(stage=verify)
  type: int
  sample: 8
abi:
  description: The ELF ABI check.
  returned: when O(stage=verify)
  type: dict
  contains:
    checked:
      description: Extension shared objects whose imported symbols were checked.
      type: list
      elements: str
    providers:
      description: Shared libraries of O(abi_provider) whose exports count.
      type: list
      elements: str
    required:
      description: How many symbols in O(abi_namespaces) the checked extensions import.
      type: int
    missing:
      description: Imported symbols no provider exports, with C(library), C(symbol), C(demangled) and C(candidates).
      type: list
      elements: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.abi import AbiToolError
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.stack import (
    RULE_KINDS,
    cuda_version_problem,
    evaluate_rules,
    pin_problems,
)
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.verify import PROBE_ENV, VerifyError, verify_venv

PYTHON_VERSION = 'import sys; print("%d.%d.%d" % sys.version_info[:3])'

RULE_SPEC = dict(
    name=dict(type='str', required=True),
    kind=dict(type='str', required=True, choices=list(RULE_KINDS)),
    packages=dict(type='list', elements='str'),
    require_all=dict(type='bool', default=False),
    package=dict(type='str'),
    version=dict(type='str'),
    needs=dict(type='dict', options=dict(package=dict(type='str', required=True),
                                         version=dict(type='str', required=True))),
    major=dict(type='str'),
    versions=dict(type='list', elements='str'),
    why=dict(type='str'),
)


def precheck(module, run_command):
    params = module.params
    rc, out, err = run_command([params['python'], '-I', '-c', PYTHON_VERSION])
    if rc != 0:
        module.fail_json(msg='the interpreter %s does not run (rc=%d): %s' % (params['python'], rc, err.strip()),
                         stage='precheck', problems=[], rules=[])
    python_version = out.strip()
    problems = pin_problems(params['pins'])
    rules = evaluate_rules(params['rules'], params['pins'], params['cuda_version'], python_version)
    problems += ['rule %s failed: %s' % (rule['name'], rule['message']) for rule in rules if not rule['ok']]
    return dict(stage='precheck', python_version=python_version, rules=rules, problems=problems)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            stage=dict(type='str', default='verify', choices=['precheck', 'verify']),
            python=dict(type='path', required=True),
            pins=dict(type='dict', default={}),
            imports=dict(type='list', elements='dict', default=[], options=dict(
                name=dict(type='str', required=True),
                version=dict(type='str'),
                attribute=dict(type='str', default='__version__'),
            )),
            rules=dict(type='list', elements='dict', default=[], options=RULE_SPEC),
            cuda_version=dict(type='str'),
            abi_check=dict(type='bool', default=True),
            abi_namespaces=dict(type='list', elements='str', default=['c10', 'at', 'torch']),
            abi_provider=dict(type='str', default='torch'),
            extension_globs=dict(type='list', elements='str', default=[]),
            require_gpu=dict(type='bool', default=False),
            command_timeout=dict(type='int', default=600),
        ),
        supports_check_mode=True,
    )
    module.params['pins'] = dict((str(k), str(v)) for k, v in module.params['pins'].items())
    if module.params['cuda_version'] is not None and cuda_version_problem(module.params['cuda_version']):
        message = 'cuda_version %s' % cuda_version_problem(module.params['cuda_version'])
        module.fail_json(msg=message, stage=module.params['stage'], problems=[message])

    run_command = module_runner(module, module.params['command_timeout'], environ_update=PROBE_ENV)

    python = module.params['python']
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        message = 'the interpreter %s is not an executable file' % python
        module.fail_json(msg=message, stage=module.params['stage'], problems=[message])
    try:
        if module.params['stage'] == 'precheck':
            result = precheck(module, run_command)
        else:
            details, problems = verify_venv(run_command, module.get_bin_path, module.params)
            result = dict(stage='verify', problems=problems, **details)
    except (VerifyError, AbiToolError, CommandTimeout) as exc:
        module.fail_json(msg=str(exc), stage=module.params['stage'], problems=[str(exc)])
    if result['problems']:
        module.fail_json(msg='%s failed: %s' % (result['stage'], '; '.join(result['problems'])), **result)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
