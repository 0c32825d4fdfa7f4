# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json
import os
import struct

import pytest

from ansible.module_utils import basic

from module_harness import TIMEOUT, invoke, patch_exits, unbounded
from ansible_collections.inferops.gpu.plugins.modules import cuda_toolkit_verify, cuda_toolkit_wheels


@pytest.fixture
def target(monkeypatch, tmp_path):
    """run_command answered by state['handler']; every call is recorded."""
    state = {'calls': [], 'handler': None, 'warnings': [], 'bin': {'timeout': TIMEOUT}}

    def run_command(self, argv, **kwargs):
        argv = unbounded(argv)
        state['calls'].append((argv, kwargs))
        return state['handler'](argv, kwargs)

    patch_exits(monkeypatch)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'warn', lambda self, msg: state['warnings'].append(msg))
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **k: state['bin'].get(name))
    monkeypatch.setattr(basic.AnsibleModule, 'tmpdir', str(tmp_path / 'moduletmp'), raising=False)
    (tmp_path / 'moduletmp').mkdir()
    return state


def run(module, args):
    return invoke(module, args)


# --- cuda_toolkit_wheels ---------------------------------------------------------------------

CU13_FILES = ['nvidia/cu13/bin/nvcc', 'nvidia/cu13/bin/ptxas', 'nvidia/cu13/include/cuda_runtime.h',
              'nvidia/cu13/lib/libcudart.so.13', 'nvidia/cu13/nvvm/bin/cicc']
LAYOUT = {
    'kind': 'cu13',
    'merge': [{'dest': 'bin', 'from': ['nvidia/cu13/bin']}, {'dest': 'include', 'from': ['nvidia/cu13/include']},
              {'dest': 'lib64', 'from': ['nvidia/cu13/lib']}, {'dest': 'nvvm', 'from': ['nvidia/cu13/nvvm']}],
    'links': {'lib64/libcudart.so': 'libcudart.so.13'},
    'required': ['bin/nvcc', 'bin/ptxas', 'nvvm/bin/cicc', 'include/cuda_runtime.h', 'lib64/libcudart.so.13'],
}
WHEELS = [{'name': 'nvidia-cuda-nvcc', 'version': '13.0.88', 'sha256': ['56fe' * 16]},
          {'name': 'nvidia-nvvm', 'version': '13.0.88', 'sha256': ['c5f4' * 16]}]


def fake_pip(files=None, rc=0):
    files = CU13_FILES if files is None else files

    def handler(argv, kwargs):
        assert argv[1:4] == ['-m', 'pip', 'install']
        if rc:
            return rc, '', 'ERROR: THESE PACKAGES DO NOT MATCH THE HASHES\nproxy said no'
        target = argv[argv.index('--target') + 1]
        for rel in files:
            path = os.path.join(target, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as handle:
                handle.write(rel)
        return 0, 'Successfully installed', ''
    return handler


def wheel_args(home, **extra):
    args = {'home': str(home), 'version': '13.0', 'wheels': WHEELS, 'layout': LAYOUT, 'python': '/venv/bin/python',
            'ca_bundle': '/etc/ssl/certs/ca-certificates.crt',
            'proxy': {'https_proxy': 'http://user:secret@proxy:3128'}}
    args.update(extra)
    return args


def test_wheels_install_lays_out_a_tree_then_does_nothing(target, tmp_path):
    home = tmp_path / 'cuda-13.0'
    target['handler'] = fake_pip()
    result = run(cuda_toolkit_wheels, wheel_args(home))
    assert result['changed'] is True and result['installed'] is True
    argv, kwargs = target['calls'][0]
    assert '--require-hashes' in argv and '--no-deps' in argv and '--isolated' in argv
    assert argv[argv.index('--cert') + 1] == '/etc/ssl/certs/ca-certificates.crt'
    assert argv[argv.index('--index-url') + 1] == 'https://pypi.org/simple'
    assert kwargs['environ_update'] == {'https_proxy': 'http://user:secret@proxy:3128',
                                        'HTTPS_PROXY': 'http://user:secret@proxy:3128'}
    assert os.path.realpath(str(home / 'bin' / 'nvcc')) == str(home / 'wheels' / 'nvidia/cu13/bin/nvcc')
    assert os.readlink(str(home / 'lib64' / 'libcudart.so')) == 'libcudart.so.13'
    assert json.loads((home / '.inferops-wheels.json').read_text())['wheels'] == [
        'nvidia-cuda-nvcc==13.0.88', 'nvidia-nvvm==13.0.88']
    assert not (home / '.wheels.staging').exists()

    target['calls'].clear()
    result = run(cuda_toolkit_wheels, wheel_args(home))
    assert (result['changed'], result['installed'], target['calls']) == (False, False, [])


def test_wheels_repairs_a_link_without_pip_and_reinstalls_a_lost_file(target, tmp_path):
    home = tmp_path / 'cuda-13.0'
    target['handler'] = fake_pip()
    run(cuda_toolkit_wheels, wheel_args(home))
    target['calls'].clear()
    os.unlink(str(home / 'bin' / 'ptxas'))
    result = run(cuda_toolkit_wheels, wheel_args(home))
    assert (result['changed'], result['installed'], result['links_created']) == (True, False, ['bin/ptxas'])
    assert target['calls'] == []
    os.unlink(str(home / 'wheels' / 'nvidia/cu13/nvvm/bin/cicc'))
    result = run(cuda_toolkit_wheels, wheel_args(home))
    assert (result['changed'], result['installed']) == (True, True)
    assert (home / 'nvvm' / 'bin' / 'cicc').exists()


def test_wheels_check_mode_on_a_fresh_host_changes_nothing(target, tmp_path):
    home = tmp_path / 'cuda-13.0'
    target['handler'] = fake_pip()
    result = run(cuda_toolkit_wheels, dict(wheel_args(home), _ansible_check_mode=True))
    assert (result['changed'], result['installed']) == (True, True)
    assert 'nvidia-cuda-nvcc==13.0.88' in result['diff']['after']
    assert target['calls'] == [] and not home.exists()


def test_wheels_pip_failure_keeps_the_old_tree_and_hides_the_proxy(target, tmp_path):
    home = tmp_path / 'cuda-13.0'
    target['handler'] = fake_pip()
    run(cuda_toolkit_wheels, wheel_args(home))
    target['handler'] = fake_pip(rc=1)
    newer = [dict(WHEELS[0], version='13.0.99'), WHEELS[1]]
    result = run(cuda_toolkit_wheels, wheel_args(home, wheels=newer, index_url='', find_links=['/srv/wheelhouse']))
    assert result['failed'] and 'DO NOT MATCH THE HASHES' in result['msg']
    argv = target['calls'][-1][0]
    assert '--no-index' in argv and argv[argv.index('--find-links') + 1] == '/srv/wheelhouse'
    assert (home / 'bin' / 'nvcc').exists() and not (home / '.wheels.staging').exists()
    assert 'nvidia-cuda-nvcc==13.0.88' in (home / '.inferops-wheels.json').read_text()


def test_wheels_never_clobber_a_real_file(target, tmp_path):
    home = tmp_path / 'cuda-13.0'
    (home / 'bin').mkdir(parents=True)
    (home / 'bin' / 'nvcc').write_text('somebody else')
    target['handler'] = fake_pip()
    result = run(cuda_toolkit_wheels, wheel_args(home))
    assert result['failed'] and 'bin/nvcc' in result['msg']
    assert (home / 'bin' / 'nvcc').read_text() == 'somebody else'


def test_wheels_missing_required_path_fails(target, tmp_path):
    home = tmp_path / 'cuda-13.0'
    target['handler'] = fake_pip(files=CU13_FILES[1:])
    result = run(cuda_toolkit_wheels, wheel_args(home))
    assert result['failed'] and 'bin/nvcc' in result['msg']


def layout_with(**changes):
    layout = json.loads(json.dumps(LAYOUT))
    layout.update(changes)
    return layout


@pytest.mark.parametrize('args,expect', [
    # An absolute or escaping link key once put a symlink outside home, pointing at /etc/hostname.
    ({'layout': layout_with(links={'ABS/evil': '/etc/hostname'})},
     ['layout.links key "ABS/evil"', 'relative path', 'layout.links["ABS/evil"] target "/etc/hostname"']),
    ({'layout': layout_with(links={'../../evil': 'libcudart.so.13'})}, ['layout.links key "../../evil"', 'relative path']),
    ({'layout': layout_with(links={'lib64/libcudart.so': '../../../etc/hostname'})}, ['target "../../../etc/hostname"']),
    ({'layout': layout_with(kind='bogus')}, ['layout.kind', '"bogus"', 'cu12, cu13']),
    ({'layout': layout_with(merge=[{'dest': '/usr/bin', 'from': ['nvidia/cu13/bin']}])},
     ['layout.merge[0].dest "/usr/bin"', 'relative path']),
    ({'layout': layout_with(merge=[{'dest': 'bin', 'from': ['../../../usr/bin']}])}, ['layout.merge[0].from "../../../usr/bin"']),
    ({'layout': layout_with(merge=[{'dest': 'bin', 'from': ['nvidia/cu13/bin'], 'match': '../*'}])}, ['match "../*"']),
    ({'layout': layout_with(required=['bin/nvcc\n'])}, ['layout.required "bin/nvcc\\n"']),
    ({'layout': layout_with(extra=1)}, ['unknown keys ["extra"]']),
    ({'site_dir': '..'}, ['site_dir', '".."']),
    ({'home': 'usr/local/cuda-13.0'}, ['home must be an absolute path', '"usr/local/cuda-13.0"']),
    ({'version': '13.0\n'}, ['version', '"13.0\\n"', 'major.minor']),
    ({'wheels': [dict(WHEELS[0], name='nvidia-cuda-nvcc\n--index-url=http://evil')]}, ['wheels[0].name', 'distribution name']),
    ({'wheels': [dict(WHEELS[0], version='13.0.88 --pre')]}, ['wheels[0].version "13.0.88 --pre"']),
    ({'wheels': [dict(WHEELS[0], sha256=['56fe'])]}, ['wheels[0].sha256 ["56fe"]', '64 hex digits']),
    ({'find_links': ['wheelhouse']}, ['find_links: "wheelhouse"', 'absolute directory or a URL']),
    ({'ca_bundle': 'certs/ca.pem'}, ['ca_bundle must be an absolute path or ""', '"certs/ca.pem"']),
    ({'index_url': 'pypi.org/simple'}, ['index_url', '"pypi.org/simple"']),
])
def test_wheels_refuses_bad_arguments_before_touching_anything(target, tmp_path, monkeypatch, args, expect):
    # ABS stands for an absolute directory of this test; relative paths would land in the working directory.
    outside = tmp_path / 'outside'
    outside.mkdir()
    monkeypatch.chdir(str(outside))
    args = json.loads(json.dumps(args).replace('ABS', str(outside)))
    expect = [text.replace('ABS', str(outside)) for text in expect]
    home = tmp_path / 'cuda-13.0'
    target['handler'] = fake_pip()
    result = run(cuda_toolkit_wheels, dict(wheel_args(home), **args))
    assert result['failed'], result
    for text in expect:
        assert text in result['msg'], (text, result['msg'])
    assert target['calls'] == [] and not home.exists() and os.listdir(str(outside)) == []


def test_wheels_validate_only_reads_and_changes_nothing(target, tmp_path):
    home = tmp_path / 'cuda-13.0'
    target['handler'] = fake_pip()
    result = run(cuda_toolkit_wheels, wheel_args(home, validate_only=True))
    assert (result['changed'], result['installed'], result['pins']) == (
        False, False, ['nvidia-cuda-nvcc==13.0.88', 'nvidia-nvvm==13.0.88'])
    assert target['calls'] == [] and not home.exists()
    result = run(cuda_toolkit_wheels, wheel_args(home, validate_only=True, layout=layout_with(kind='bogus')))
    assert result['failed'] and 'layout.kind' in result['msg']


# --- cuda_toolkit_verify ---------------------------------------------------------------------

def cubin(sm):
    header = bytearray(64)
    header[:4], header[4], header[5], header[7], header[8] = b'\x7fELF', 2, 1, 0x41, 8
    struct.pack_into('<HH', header, 16, 2, 190)
    struct.pack_into('<I', header, 48, 0x6000002 | (sm << 8))
    return bytes(header)


def toolkit(tmp_path, release='13.0', build='13.0.88', ldpath=None, wrong_arch=None, ptxas_error=None):
    home = tmp_path / 'cuda-13.0'
    (home / 'bin').mkdir(parents=True)
    (home / 'lib64').mkdir()
    (home / 'lib64' / 'libcudart.so.13').write_text('')
    for tool in ('nvcc', 'ptxas'):
        (home / 'bin' / tool).write_text('#!/bin/sh\n')
        os.chmod(str(home / 'bin' / tool), 0o755)
    ldpath = ldpath or str(home / 'lib64' / 'libcudart.so.13')

    def handler(argv, kwargs):
        tool = os.path.basename(argv[0])
        if argv[1:] == ['--version']:
            return 0, 'Cuda compilation tools, release %s, V%s\n' % (release, build), ''
        if tool == 'ldconfig':
            return 0, '\tlibcudart.so.13 (libc6,x86-64) => %s\n' % ldpath, ''
        if tool == 'ptxas' and ptxas_error:
            return 255, '', ptxas_error
        arch = [a for a in argv if a.startswith('-arch=')][0].split('=')[1]
        sm = int(arch[3:]) if wrong_arch is None else wrong_arch
        with open(argv[argv.index('-o') + 1], 'wb') as handle:
            handle.write(cubin(sm))
        return 0, '', ''
    return home, handler


def verify_args(home, **extra):
    args = {'home': str(home), 'version': '13.0', 'ptxas': str(home / 'bin/ptxas'), 'nvcc': str(home / 'bin/nvcc'),
            'archs': ['sm_90', 'sm_120'], 'ldconfig_libs': ['libcudart.so.13']}
    args.update(extra)
    return args


@pytest.fixture
def machine(monkeypatch):
    monkeypatch.setattr(cuda_toolkit_verify.platform, 'machine', lambda: 'x86_64')


def test_verify_compiles_with_nvcc_and_ptxas(target, tmp_path, machine):
    home, target['handler'] = toolkit(tmp_path)
    target['bin'] = {'timeout': TIMEOUT, 'ldconfig': '/sbin/ldconfig', 'g++': '/usr/bin/g++'}
    result = run(cuda_toolkit_verify, verify_args(home, _ansible_check_mode=True))
    assert 'failed' not in result and result['changed'] is False
    assert (result['version_installed'], result['nvcc_version'], result['compile_mode']) == ('13.0.88', '13.0.88', 'nvcc')
    assert [(c['arch'], c['tool'], c['elf_arch']) for c in result['cubins']] == [
        ('sm_90', 'nvcc', 90), ('sm_90', 'ptxas', 90), ('sm_120', 'nvcc', 120), ('sm_120', 'ptxas', 120)]
    nvcc_calls = [call[0] for call in target['calls'] if call[0][0].endswith('nvcc') and '-cubin' in call[0]]
    assert nvcc_calls[0][nvcc_calls[0].index('-ccbin') + 1] == '/usr/bin/g++'


def test_verify_without_host_compiler_falls_back_to_ptxas(target, tmp_path, machine):
    home, target['handler'] = toolkit(tmp_path)
    target['bin'] = {'timeout': TIMEOUT, 'ldconfig': '/sbin/ldconfig'}
    result = run(cuda_toolkit_verify, verify_args(home))
    assert result['compile_mode'] == 'ptxas' and target['warnings']
    result = run(cuda_toolkit_verify, verify_args(home, compile='nvcc'))
    assert result['failed'] and result['step'] == 'nvcc compile' and 'host compiler' in result['msg']


@pytest.mark.parametrize('kwargs,step,text', [
    ({'release': '12.8', 'build': '12.8.93'}, 'ptxas --version', 'reports release 12.8, expected 13.0'),
    ({'ldpath': '/usr/local/cuda-12.8/lib64/libcudart.so.13'}, 'ldconfig resolves libcudart.so.13', 'outside'),
    ({'wrong_arch': 90}, 'cubin for sm_120 (nvcc)', 'says sm_90'),
    ({'ptxas_error': "ptxas fatal   : Value 'sm_120' is not defined for option 'gpu-name'"},
     'ptxas -arch=sm_90', "Value 'sm_120' is not defined"),
])
def test_verify_failures_name_the_step_and_show_the_tool(target, tmp_path, machine, kwargs, step, text):
    home, target['handler'] = toolkit(tmp_path, **kwargs)
    target['bin'] = {'timeout': TIMEOUT, 'ldconfig': '/sbin/ldconfig', 'g++': '/usr/bin/g++'}
    result = run(cuda_toolkit_verify, verify_args(home))
    assert result['failed'] and result['step'] == step
    assert text in result['msg'] and ('step "%s"' % step) in result['msg']


@pytest.mark.parametrize('args,expect', [
    # Relative paths worked only because the connection's working directory happened to be /.
    ({'home': 'usr/local/cuda-13.0'}, ['home must be an absolute path', '"usr/local/cuda-13.0"']),
    ({'ptxas': 'bin/ptxas'}, ['ptxas must be an absolute path', '"bin/ptxas"']),
    ({'nvcc': 'bin/nvcc'}, ['nvcc must be an absolute path or ""', '"bin/nvcc"']),
    ({'host_compiler': 'bin/g++'}, ['host_compiler', '"bin/g++"', 'command name']),
    ({'archs': ['sm_120\n']}, ['archs: "sm_120\\n"', 'sm_XX']),
    ({'archs': ['compute_90']}, ['archs: "compute_90"']),
    ({'version': '13'}, ['version', '"13"', 'major.minor']),
])
def test_verify_refuses_bad_arguments_before_running_anything(target, tmp_path, machine, args, expect):
    home, target['handler'] = toolkit(tmp_path)
    target['bin'] = {'ldconfig': '/sbin/ldconfig', 'g++': '/usr/bin/g++'}
    result = run(cuda_toolkit_verify, dict(verify_args(home), **args))
    assert result['failed'] and result['step'] == 'arguments', result
    for text in expect:
        assert text in result['msg'], (text, result['msg'])
    assert target['calls'] == []


def test_verify_accepts_a_host_compiler_by_name_or_absolute_path(target, tmp_path, machine):
    home, target['handler'] = toolkit(tmp_path)
    target['bin'] = {'timeout': TIMEOUT, 'ldconfig': '/sbin/ldconfig', 'g++-12': '/usr/bin/g++-12'}
    result = run(cuda_toolkit_verify, verify_args(home, host_compiler='g++-12'))
    assert 'failed' not in result and result['host_compiler'] == '/usr/bin/g++-12'


def test_verify_missing_ptxas_and_unregistered_library(target, tmp_path, machine):
    home, handler = toolkit(tmp_path)
    target['handler'] = handler
    target['bin'] = {'timeout': TIMEOUT, 'ldconfig': '/sbin/ldconfig'}
    result = run(cuda_toolkit_verify, verify_args(home, ptxas=str(home / 'bin/missing')))
    assert result['failed'] and result['step'] == 'ptxas --version' and 'not an executable' in result['msg']
    target['handler'] = lambda argv, kwargs: (0, '', '') if 'ldconfig' in argv[0] else handler(argv, kwargs)
    result = run(cuda_toolkit_verify, verify_args(home, nvcc='', compile='none'))
    assert result['failed'] and 'not in the dynamic loader cache' in result['msg']
