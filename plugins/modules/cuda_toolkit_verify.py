#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cuda_toolkit_verify
short_description: Prove a CUDA toolkit works by compiling a kernel for each target GPU architecture
version_added: 0.1.0
description:
  - Checks that C(ptxas --version) and, when the toolkit has one, C(nvcc --version) report O(version).
  - Checks that C(ldconfig -p) resolves each of O(ldconfig_libs) into O(home) (symlinks resolved).
  - Compiles a tiny kernel to a cubin for every architecture in O(archs) and reads the architecture
    back from each cubin's ELF header. With C(nvcc) the kernel goes from CUDA C++ through the whole
    front end (host preprocessor, C(cicc), headers, C(ptxas)); C(ptxas) alone always assembles a
    PTX version of the same kernel.
  - On failure the message names the step and carries the tool's own output.
  - Changes nothing on the target (the cubins are written to a temporary directory); C(changed) is always V(false).
  - Relative paths are refused before anything runs, since they would depend on the working directory of the connection.
options:
  home:
    description: Toolkit directory, an absolute path, for example C(/usr/local/cuda-13.0).
    type: path
    required: true
  version:
    description: Expected CUDA version, C(major.minor), for example C("13.0").
    type: str
    required: true
  ptxas:
    description: Absolute path of C(ptxas).
    type: path
    required: true
  nvcc:
    description: Absolute path of C(nvcc). Empty for a toolkit without one (the CUDA 12 PyPI wheels ship only C(ptxas)).
    type: str
    default: ''
  archs:
    description: Architectures to build cubins for, as C(sm_XX) (digits, optionally followed by C(a) or C(f)).
    type: list
    elements: str
    default: [sm_90, sm_100, sm_120]
  compile:
    description:
      - V(auto) compiles with C(nvcc) when the toolkit has it and a host compiler is found, and with
        C(ptxas) otherwise (reported as RV(compile_mode)).
      - V(nvcc) requires the C(nvcc) path; a missing host compiler is a failure.
      - V(ptxas) assembles the PTX kernel only. V(none) skips compiling.
      - C(ptxas) always assembles the PTX kernel too, unless V(none).
    type: str
    choices: [auto, nvcc, ptxas, none]
    default: auto
  host_compiler:
    description:
      - Host compiler C(nvcc) uses (C(-ccbin)), a command name looked up in E(PATH) or an absolute path.
      - Empty looks for C(g++), then C(gcc), in E(PATH).
    type: str
    default: ''
  ldconfig_libs:
    description: Sonames that C(ldconfig -p) must resolve into O(home). Empty skips the check.
    type: list
    elements: str
    default: []
  command_timeout:
    description: Seconds any one command (C(nvcc), C(ptxas), C(ldconfig)) may run before it is killed and the module fails naming it.
    type: int
    default: 300
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.gpu.attributes.read_only
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Prove CUDA 13.0 builds for Hopper and Blackwell
  inferops.gpu.cuda_toolkit_verify:
    home: /usr/local/cuda-13.0
    version: "13.0"
    nvcc: /usr/local/cuda-13.0/bin/nvcc
    ptxas: /usr/local/cuda-13.0/bin/ptxas
    archs: [sm_90, sm_120]
    ldconfig_libs: [libcudart.so.13]
  register: cuda
"""

RETURN = r"""
version_installed:
  description: Full toolkit version reported by C(ptxas --version).
  returned: always
  type: str
  sample: 13.0.88
nvcc_version:
  description: Full version reported by C(nvcc --version); empty without C(nvcc).
  returned: always
  type: str
  sample: 13.0.88
compile_mode:
  description: How the kernel was compiled from source, V(nvcc), V(ptxas) or V(none).
  returned: always
  type: str
  sample: nvcc
host_compiler:
  description: Host compiler C(nvcc) used; empty when C(nvcc) did not run.
  returned: always
  type: str
  sample: /usr/bin/g++
ldconfig:
  description: Path C(ldconfig -p) resolves for each soname of O(ldconfig_libs).
  returned: always
  type: dict
  sample: {libcudart.so.13: /usr/local/cuda-13.0/lib64/libcudart.so.13}
cubins:
  description: One entry per compiled cubin.
  returned: always
  type: list
  elements: dict
  sample: [{arch: sm_120, tool: nvcc, elf_arch: 120, size: 3560}]
"""

import os
import platform
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner

from ansible_collections.inferops.gpu.plugins.module_utils.cuda_toolkit.toolkit import (
    KERNEL_CU,
    KERNEL_PTX,
    absolute_error,
    arch_number,
    archs_errors,
    command_error,
    cubin_arch,
    parse_ldconfig,
    parse_release,
    path_within,
    resolve_soname,
    version_error,
)


def argument_errors(params):
    """Everything wrong with the arguments, each naming the option, the value and what is allowed."""
    errors = [absolute_error('home', params['home']), absolute_error('ptxas', params['ptxas']),
              absolute_error('nvcc', params['nvcc'], empty_ok=True), command_error('host_compiler', params['host_compiler']),
              version_error('version', params['version'])]
    return [error for error in errors if error] + archs_errors('archs', params['archs'])


class Verifier:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.run_command = module_runner(module, self.params['command_timeout'])
        self.result = dict(changed=False, version_installed='', nvcc_version='', compile_mode='none',
                           host_compiler='', ldconfig={}, cubins=[])

    def fail(self, step, detail, output=''):
        msg = 'CUDA %s toolkit in %s failed verification at step "%s": %s' % (
            self.params['version'], self.params['home'], step, detail)
        if output:
            msg += '\n' + output.strip()
        self.module.fail_json(msg=msg, step=step, output=output, **self.result)

    def run(self, step, argv, cwd=None):
        try:
            rc, out, err = self.run_command(argv, cwd=cwd)
        except OSError as exc:
            self.fail(step, 'could not run %s: %s' % (argv[0], exc))
        except CommandTimeout as exc:
            self.fail(step, str(exc))
        if rc != 0:
            self.fail(step, '`%s` exited with %d' % (' '.join(argv), rc), (out or '') + (err or ''))
        return out + err

    def tool_version(self, name, path):
        step = '%s --version' % name
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            self.fail(step, '%s is not an executable file' % path)
        out = self.run(step, [path, '--version'])
        short, full = parse_release(out)
        if short != self.params['version']:
            self.fail(step, '%s reports release %s, expected %s' % (path, short or 'no release', self.params['version']), out)
        return full

    def check_ldconfig(self):
        libs = self.params['ldconfig_libs']
        if not libs:
            return
        ldconfig = self.module.get_bin_path('ldconfig', opt_dirs=['/sbin', '/usr/sbin'])
        if not ldconfig:
            self.fail('ldconfig -p', 'ldconfig not found')
        entries = parse_ldconfig(self.run('ldconfig -p', [ldconfig, '-p']))
        for soname in libs:
            path = resolve_soname(entries, soname, platform.machine())
            step = 'ldconfig resolves %s' % soname
            if path is None:
                self.fail(step, '%s is not in the dynamic loader cache (ldconfig -p); is the ld.so.conf.d file there '
                          'and was ldconfig run?' % soname)
            if not path_within(path, self.params['home']):
                self.fail(step, '%s resolves to %s (%s), outside %s'
                          % (soname, path, os.path.realpath(path), self.params['home']))
            self.result['ldconfig'][soname] = path

    def find_host_compiler(self):
        wanted = self.params['host_compiler']
        for name in ([wanted] if wanted else ['g++', 'gcc']):
            path = name if os.path.isabs(name) and os.access(name, os.X_OK) else self.module.get_bin_path(name)
            if path:
                return path
        return ''

    def check_cubin(self, arch, tool, path):
        step = 'cubin for %s (%s)' % (arch, tool)
        try:
            with open(path, 'rb') as handle:
                data = handle.read()
            elf_arch = cubin_arch(data)
        except (IOError, OSError, ValueError) as exc:
            self.fail(step, 'cannot read %s: %s' % (path, exc))
        if elf_arch != arch_number(arch):
            self.fail(step, '%s says sm_%d in its ELF header, expected %s' % (path, elf_arch, arch))
        self.result['cubins'].append(dict(arch=arch, tool=tool, elf_arch=elf_arch, size=len(data)))

    def compile(self, nvcc):
        mode = self.params['compile']
        if mode == 'none':
            return
        if mode in ('auto', 'nvcc') and not nvcc:
            if mode == 'nvcc':
                self.fail('nvcc compile', 'compile=nvcc but this toolkit has no nvcc')
            mode = 'ptxas'
        host = ''
        if mode in ('auto', 'nvcc'):
            host = self.find_host_compiler()
            if not host:
                if mode == 'nvcc':
                    self.fail('nvcc compile', 'nvcc needs a host compiler to preprocess CUDA C++ and none was found (%s)'
                              % (self.params['host_compiler'] or 'g++, gcc'))
                self.module.warn('no host compiler found: the CUDA %s kernel was assembled with ptxas only, nvcc\'s '
                                 'front end was not exercised' % self.params['version'])
                mode = 'ptxas'
            else:
                mode = 'nvcc'
        self.result['compile_mode'] = mode
        self.result['host_compiler'] = host
        work = tempfile.mkdtemp(prefix='cuda-toolkit-verify-', dir=self.module.tmpdir)
        try:
            with open(os.path.join(work, 'kernel.cu'), 'w') as handle:
                handle.write(KERNEL_CU)
            with open(os.path.join(work, 'kernel.ptx'), 'w') as handle:
                handle.write(KERNEL_PTX)
            for arch in self.params['archs']:
                if mode == 'nvcc':
                    out = os.path.join(work, 'nvcc_%s.cubin' % arch)
                    self.run('nvcc -cubin -arch=%s' % arch,
                             [nvcc, '-cubin', '-arch=%s' % arch, '-ccbin', host, '-o', out, 'kernel.cu'], cwd=work)
                    self.check_cubin(arch, 'nvcc', out)
                out = os.path.join(work, 'ptxas_%s.cubin' % arch)
                self.run('ptxas -arch=%s' % arch, [self.params['ptxas'], '-arch=%s' % arch, '-o', out, 'kernel.ptx'],
                         cwd=work)
                self.check_cubin(arch, 'ptxas', out)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def verify(self):
        if not os.path.isdir(self.params['home']):
            self.fail('toolkit directory', '%s does not exist' % self.params['home'])
        self.result['version_installed'] = self.tool_version('ptxas', self.params['ptxas'])
        nvcc = self.params['nvcc']
        if nvcc:
            self.result['nvcc_version'] = self.tool_version('nvcc', nvcc)
        self.check_ldconfig()
        self.compile(nvcc)
        return self.result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            home=dict(type='path', required=True),
            version=dict(type='str', required=True),
            ptxas=dict(type='path', required=True),
            nvcc=dict(type='str', default=''),
            archs=dict(type='list', elements='str', default=['sm_90', 'sm_100', 'sm_120']),
            compile=dict(type='str', choices=['auto', 'nvcc', 'ptxas', 'none'], default='auto'),
            host_compiler=dict(type='str', default=''),
            ldconfig_libs=dict(type='list', elements='str', default=[]),
            command_timeout=dict(type='int', default=300),
        ),
        supports_check_mode=True,
    )
    errors = argument_errors(module.params)
    if errors:
        module.fail_json(msg='cuda_toolkit_verify: ' + '; '.join(errors), errors=errors, step='arguments')
    module.exit_json(**Verifier(module).verify())


if __name__ == '__main__':
    main()
