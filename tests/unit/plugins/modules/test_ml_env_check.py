# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ml_env_check end to end: a real venv holding a fake torch and sgl-kernel whose shared objects
are compiled during the test from tests/fixtures/abi, checked with the real nm and c++filt."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from ansible.module_utils import basic

from module_harness import invoke, patch_exits
from ansible_collections.inferops.gpu.plugins.modules import ml_env_check


SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'fixtures', 'abi')
ROLE_VARS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..', 'roles', 'ml_env', 'vars',
                         'main.yml')
pytestmark = pytest.mark.skipif(not all(shutil.which(tool) for tool in ('g++', 'nm', 'c++filt')),
                                reason='needs g++ and binutils')
PINS = {'torch': '2.9.1+cu130', 'sgl-kernel': '0.3.21+cu130'}
IMPORTS = [{'name': 'torch', 'version': '2.9.1+cu130'}, {'name': 'sgl_kernel', 'version': '0.3.21'}]
INT_LINE_DEMANGLED = 'c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)'


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    patch_exits(monkeypatch)


def run_module(args):
    return invoke(ml_env_check, args)


def compile_so(source, dest):
    subprocess.run(['g++', '-shared', '-fPIC', '-o', dest, os.path.join(SOURCES, source)], check=True)


def add_distribution(site, name, version, files):
    """Write the files and the dist-info that importlib.metadata reads (RECORD lists the files)."""
    for rel, content in files.items():
        path = os.path.join(site, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(content, tuple):  # (source.cpp,) -> compile a shared object
            compile_so(content[0], path)
        else:
            with open(path, 'w') as handle:
                handle.write(content)
    info = os.path.join(site, '%s-%s.dist-info' % (name.replace('-', '_'), version))
    os.makedirs(info)
    with open(os.path.join(info, 'METADATA'), 'w') as handle:
        handle.write('Metadata-Version: 2.1\nName: %s\nVersion: %s\n' % (name, version))
    with open(os.path.join(info, 'RECORD'), 'w') as handle:
        handle.write(''.join('%s,,\n' % rel for rel in files))


@pytest.fixture
def venv(tmp_path):
    """A venv with torch 2.10's ABI (libc10 exports the unsigned int line) and an sgl-kernel
    built against torch 2.9.1 (imports the int line): the field notes' breakage."""
    root = tmp_path / 'release'
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(root)], check=True)
    python = str(root / 'bin' / 'python')
    site = subprocess.run([python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                          check=True, capture_output=True, text=True).stdout.strip()
    add_distribution(site, 'torch', '2.9.1+cu130', {
        'torch/__init__.py': '__version__ = "2.9.1+cu130"\nfrom . import cuda, version\n',
        'torch/version.py': 'cuda = "13.0"\n',
        'torch/cuda.py': 'def is_available():\n    return False\n\n\ndef device_count():\n    return 0\n',
        'torch/lib/libc10.so': ('provider.cpp',),
    })
    add_distribution(site, 'sgl-kernel', '0.3.21+cu130', {
        'sgl_kernel/__init__.py': '__version__ = "0.3.21"\n',
        'sgl_kernel/common_ops.abi3.so': ('extension_mismatch.cpp',),
    })
    return {'python': python, 'site': site, 'root': str(root)}


def test_abi_mismatch_fails_naming_the_symbol_demangled_and_the_library(venv):
    result = run_module({'python': venv['python'], 'pins': PINS, 'imports': IMPORTS, 'cuda_version': '13.0'})
    assert result['failed']
    ext = os.path.realpath(os.path.join(venv['site'], 'sgl_kernel', 'common_ops.abi3.so'))
    assert result['abi']['checked'] == [ext]
    assert result['abi']['providers'] == [os.path.realpath(os.path.join(venv['site'], 'torch', 'lib', 'libc10.so'))]
    missing = dict((m['demangled'], m) for m in result['abi']['missing'])
    assert set(missing) == {'c10::f(int)', INT_LINE_DEMANGLED}
    assert missing[INT_LINE_DEMANGLED]['library'] == ext
    assert missing[INT_LINE_DEMANGLED]['symbol'] == '_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib'
    assert '%s needs %s, which torch does not export' % (ext, INT_LINE_DEMANGLED) in result['msg']
    assert 'unsigned int, bool)' in result['msg']
    # Everything else about the venv is fine: only the ABI makes it fail.
    assert len(result['problems']) == 2
    assert all(p['ok'] for p in result['packages']) and all(i['ok'] for i in result['imports'])
    assert result['torch_cuda'] == '13.0' and result['gpu_count'] == 0


def test_abi_mismatch_against_a_torch_sized_provider_fails_in_seconds(venv, torch_sized_provider):
    """Through the real run_command: feeding every export to one c++filt on stdin deadlocked here."""
    shutil.copy(torch_sized_provider, os.path.join(venv['site'], 'torch', 'lib', 'libc10.so'))
    started = time.monotonic()
    result = run_module({'python': venv['python'], 'pins': PINS, 'imports': IMPORTS, 'command_timeout': 60})
    assert time.monotonic() - started < 20
    assert result['failed'] and len(result['problems']) == 2, result['msg']
    missing = dict((m['demangled'], m) for m in result['abi']['missing'])
    assert missing[INT_LINE_DEMANGLED]['candidates'] == [
        'c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, unsigned int, bool)']


def test_matching_abi_passes_and_reads_the_extension(venv):
    compile_so('extension_match.cpp', os.path.join(venv['site'], 'sgl_kernel', 'common_ops.abi3.so'))
    result = run_module({'python': venv['python'], 'pins': PINS, 'imports': IMPORTS, 'cuda_version': '13.0'})
    assert not result.get('failed'), result['msg']
    assert result['changed'] is False
    assert result['abi']['required'] == 1 and len(result['abi']['checked']) == 1
    assert result['problems'] == []
    assert result['prefix'] == venv['root']


def test_torch_own_extensions_are_checked_only_when_a_glob_names_them(venv):
    compile_so('extension_match.cpp', os.path.join(venv['site'], 'sgl_kernel', 'common_ops.abi3.so'))
    compile_so('extension_mismatch.cpp', os.path.join(venv['site'], 'torch', '_C.cpython-x.so'))
    args = {'python': venv['python'], 'pins': PINS, 'imports': IMPORTS}
    assert not run_module(args).get('failed')
    result = run_module(dict(args, extension_globs=['torch/_C*.so']))
    assert result['failed']
    assert {m['library'] for m in result['abi']['missing']} == {
        os.path.realpath(os.path.join(venv['site'], 'torch', '_C.cpython-x.so'))}


def test_versions_cuda_build_and_missing_pins_are_problems(venv):
    compile_so('extension_match.cpp', os.path.join(venv['site'], 'sgl_kernel', 'common_ops.abi3.so'))
    result = run_module({
        'python': venv['python'], 'cuda_version': '12.8', 'require_gpu': True,
        'pins': dict(PINS, torch='2.10.0+cu130', **{'flashinfer-python': '0.6.4'}),
        'imports': IMPORTS + [{'name': 'flashinfer', 'version': '0.6.4'}, {'name': 'sgl_kernel', 'version': '0.3.20'}],
    })
    assert result['failed']
    assert set(result['problems']) == {
        'torch is 2.9.1+cu130, the pin is 2.10.0+cu130',
        'flashinfer-python 0.6.4 is not installed',
        "import flashinfer failed: ModuleNotFoundError: No module named 'flashinfer'",
        'sgl_kernel reports version 0.3.21, expected 0.3.20',
        'torch is built for CUDA 13.0, the toolkit is 12.8',
        'no GPU is visible to torch (require_gpu)',
    }


def test_the_probe_sees_the_venv_only(venv, tmp_path, monkeypatch):
    # A PYTHONPATH or user site with another sgl_kernel must not make a broken venv pass.
    decoy = tmp_path / 'decoy' / 'sgl_kernel'
    decoy.mkdir(parents=True)
    (decoy / '__init__.py').write_text('__version__ = "0.3.20"\n')
    monkeypatch.setenv('PYTHONPATH', str(decoy.parent))
    monkeypatch.setenv('PYTHONNOUSERSITE', '')
    result = run_module({'python': venv['python'], 'imports': [{'name': 'sgl_kernel', 'version': '0.3.21'}],
                         'abi_check': False})
    assert not result.get('failed'), result['msg']
    assert result['abi']['checked'] == []


def test_a_missing_interpreter_is_named(tmp_path):
    result = run_module({'python': str(tmp_path / 'nope' / 'bin' / 'python')})
    assert result['failed']
    assert 'nope/bin/python' in result['msg']


def test_missing_binutils_is_a_clear_error(venv, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path',
                        lambda self, name, *a, **k: shutil.which(name) if name == 'timeout' else None)
    result = run_module({'python': venv['python'], 'pins': PINS})
    assert result['failed'] and 'install binutils' in result['msg']


def test_precheck_names_the_failed_rule(venv):
    rules = [{'name': 'sgl-kernel-0.3.21-needs-torch-2.9', 'kind': 'requires', 'package': 'sgl-kernel',
              'version': '0.3.21', 'needs': {'package': 'torch', 'version': '2.9.*'}},
             {'name': 'python-supported', 'kind': 'python_version', 'versions': ['2.7']}]
    result = run_module({'stage': 'precheck', 'python': sys.executable, 'cuda_version': '13.0', 'rules': rules,
                         'pins': {'torch': '2.10.0+cu130', 'sgl-kernel': '0.3.21+cu130'}})
    assert result['failed']
    assert [r['name'] for r in result['rules'] if not r['ok']] == ['sgl-kernel-0.3.21-needs-torch-2.9',
                                                                   'python-supported']
    assert ('rule sgl-kernel-0.3.21-needs-torch-2.9 failed: sgl-kernel 0.3.21+cu130 needs torch 2.9.*; '
            'the pin set has torch 2.10.0+cu130') in result['msg']


@pytest.mark.parametrize('nccl, failed', [('2.26.2', True), ('2.27.5', False)])
def test_precheck_holds_the_nccl_floor_of_the_role(nccl, failed):
    # The role's rule as validate.yml passes it (why and all) through the module's argument spec.
    with open(ROLE_VARS) as handle:
        rule = [r for r in yaml.safe_load(handle)['__ml_env_rules'] if r['name'] == 'nccl-newer-than-2.26.2']
    result = run_module({'stage': 'precheck', 'python': sys.executable, 'rules': rule,
                         'pins': dict(PINS, **{'nvidia-nccl-cu12': nccl})})
    assert result.get('failed', False) is failed
    assert result['rules'] == [{'name': 'nccl-newer-than-2.26.2', 'kind': 'newer_than', 'ok': not failed, 'message':
                                'nvidia-nccl-cu12 must be newer than 2.26.2; the pin set has nvidia-nccl-cu12 2.26.2'
                                if failed else ''}]
    if failed:
        assert ('rule nccl-newer-than-2.26.2 failed: nvidia-nccl-cu12 must be newer than 2.26.2; the pin set has '
                'nvidia-nccl-cu12 2.26.2') in result['msg']


def test_precheck_rejects_malformed_pins():
    result = run_module({'stage': 'precheck', 'python': sys.executable, 'pins': {'torch': '>=2.9'}})
    assert result['failed'] and "torch '>=2.9' is not an exact version" in result['msg']


def test_precheck_passes_and_reports_the_interpreter():
    result = run_module({'stage': 'precheck', 'python': sys.executable, 'pins': PINS, 'cuda_version': '13.0',
                         'rules': [{'name': 'tags', 'kind': 'cuda_local_tag'}]})
    assert not result.get('failed')
    assert result['python_version'] == '%d.%d.%d' % sys.version_info[:3]
    assert result['rules'] == [{'name': 'tags', 'kind': 'cuda_local_tag', 'ok': True, 'message': ''}]


@pytest.mark.parametrize('stage', ['precheck', 'verify'])
def test_a_cuda_version_that_is_not_one_is_named(stage):
    result = run_module({'stage': stage, 'python': sys.executable, 'cuda_version': 'abc'})
    assert result['failed']
    assert result['msg'].startswith('cuda_version "abc" is not a CUDA version (allowed:')


def test_precheck_rejects_a_pin_name_with_a_trailing_newline():
    result = run_module({'stage': 'precheck', 'python': sys.executable, 'pins': {'six\n': '1.17.0'}})
    assert result['failed'] and "'six\\n' is not a distribution name" in result['msg']


@pytest.mark.parametrize('rule, missing', [
    ({'name': 'r1', 'kind': 'requires', 'package': 'six'}, 'a requires rule needs package, needs; this one is missing needs'),
    ({'name': 'r1', 'kind': 'same_version'}, 'a same_version rule needs packages; this one is missing packages'),
    ({'name': 'r1', 'kind': 'python_version'}, 'a python_version rule needs versions; this one is missing versions'),
])
def test_precheck_names_a_rule_without_its_fields(rule, missing):
    result = run_module({'stage': 'precheck', 'python': sys.executable, 'pins': {'six': '1.17.0'}, 'rules': [rule]})
    assert result['failed']
    assert 'rule r1 failed: %s' % missing in result['msg']
    assert result['rules'] == [{'name': 'r1', 'kind': rule['kind'], 'ok': False, 'message': missing}]
