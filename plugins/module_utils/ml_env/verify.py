# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judge a venv from the probe's answer: installed versions, imports, CUDA build, GPUs, ABI.

Everything that touches the host is passed in (``run_command``), so unit tests drive it
against real venvs and real shared objects built in a temporary directory.
"""

from __future__ import annotations

from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.abi import (
    SymbolReader,
    check_abi,
    describe_missing,
    is_elf,
)
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.probe import (
    parse_probe_output,
    probe_source,
    request,
)
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.stack import (
    cuda_major,
    version_matches,
    versions_equal,
)

# The probe must see the venv as it is: no user site-packages, no PYTHONPATH (-I), and it must
# not write byte code into the release it verifies (-B).
PROBE_ENV = {'PYTHONNOUSERSITE': '1', 'LC_ALL': 'C'}


class VerifyError(Exception):
    """The venv could not be examined at all (no interpreter, probe crashed, no binutils)."""


def run_probe(run_command, python, pins, imports, abi_provider, extension_globs):
    argv = [python, '-I', '-B', '-c', probe_source()]
    rc, out, err = run_command(argv, data=request(pins, imports, abi_provider, extension_globs))
    answer = parse_probe_output(out or '')
    if answer is None:
        tail = '\n'.join((err or out or '').strip().splitlines()[-5:])
        raise VerifyError('the venv interpreter %s could not run the probe (rc=%s): %s' % (python, rc, tail))
    return answer


def compare_packages(pins, answer):
    results, problems = [], []
    installed = dict((item['name'], item['installed']) for item in answer['packages'])
    for name, expected in sorted(pins.items()):
        found = installed.get(name)
        ok = found is not None and versions_equal(found, expected)
        results.append({'name': name, 'expected': expected, 'installed': found, 'ok': ok})
        if found is None:
            problems.append('%s %s is not installed' % (name, expected))
        elif not ok:
            problems.append('%s is %s, the pin is %s' % (name, found, expected))
    return results, problems


def compare_imports(imports, answer):
    results, problems = [], []
    seen = dict((item['name'], item) for item in answer['imports'])
    for item in imports:
        got = seen.get(item['name'], {})
        expected = item.get('version')
        entry = {'name': item['name'], 'expected': expected, 'version': got.get('version'),
                 'error': got.get('error'), 'ok': False}
        if entry['error']:
            problems.append('import %s failed: %s' % (item['name'], entry['error']))
        elif expected and not version_matches(entry['version'], expected):
            problems.append('%s reports version %s, expected %s' % (item['name'], entry['version'], expected))
        else:
            entry['ok'] = True
        results.append(entry)
    extra = seen.get('torch.cuda')
    if extra:
        problems.append('torch.cuda failed: %s' % extra['error'])
    return results, problems


def compare_cuda(answer, cuda_version, require_gpu):
    problems = []
    torch_cuda = answer.get('torch_cuda')
    if cuda_version and torch_cuda and cuda_major(torch_cuda) != cuda_major(cuda_version):
        problems.append('torch is built for CUDA %s, the toolkit is %s' % (torch_cuda, cuda_version))
    if require_gpu and not answer.get('gpu_count'):
        problems.append('no GPU is visible to torch (require_gpu)')
    return problems


def verify_venv(run_command, find_binary, params):
    """The whole verification. Returns (result dict, problems list)."""
    python = params['python']
    answer = run_probe(run_command, python, params['pins'], params['imports'],
                       params['abi_provider'] if params['abi_check'] else '', params['extension_globs'])
    packages, problems = compare_packages(params['pins'], answer)
    imports, import_problems = compare_imports(params['imports'], answer)
    problems += import_problems + compare_cuda(answer, params.get('cuda_version'), params['require_gpu'])
    abi = {'checked': [], 'providers': [], 'required': 0, 'missing': []}
    if params['abi_check']:
        nm = find_binary('nm')
        if not nm:
            raise VerifyError('the ABI check needs nm and c++filt (binutils) on the target; install binutils '
                              'or set abi_check=false')
        reader = SymbolReader(run_command, nm=nm, cxxfilt=find_binary('c++filt'))
        extensions = [path for path in answer['extensions'] if is_elf(path)]
        providers = [path for path in answer['providers'] if is_elf(path)]
        abi = check_abi(extensions, providers, reader, params['abi_namespaces'])
        provider = params['abi_provider']
        if abi['missing'] and not providers:
            problems.append('%d torch symbols are imported by %s but %s (%s) has no shared libraries' % (
                len(abi['missing']), ', '.join(sorted(set(m['library'] for m in abi['missing']))),
                provider, answer.get('provider_dir') or 'not installed'))
        else:
            problems += [describe_missing(entry, provider) for entry in abi['missing']]
    result = {
        'python_version': answer['python_version'],
        'prefix': answer['prefix'],
        'packages': packages,
        'imports': imports,
        'torch_cuda': answer.get('torch_cuda'),
        'gpu_count': answer.get('gpu_count'),
        'abi': abi,
    }
    return result, problems
