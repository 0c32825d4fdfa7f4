# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What tests/bad_inputs/cuda_toolkit.yml does not pin: the package method on a host NVIDIA's
repository lacks (the recorded Debian 13 facts), the CA bundle's stat as validate.yml records it,
the role's own pinned wheel sets, and the values each core renders (2.17 gives strings where 2.21
gives numbers and booleans)."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible_collections.inferops.gpu.plugins.module_utils.cuda_toolkit import validate as ct
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import MISSING, run_checks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
with open(os.path.join(ROOT, 'roles', 'cuda_toolkit', 'vars', 'main.yml')) as handle:
    ROLE_VARS = yaml.safe_load(handle)


def facts(name):
    with open(os.path.join(ROOT, 'tests', 'unit', 'fixtures', 'facts', name + '.json')) as handle:
        return json.load(handle)


# The role's defaults as a Debian 12 host renders them.
DEFAULTS = dict(
    cuda_toolkit_version='13.0', cuda_toolkit_method='package', cuda_toolkit_root='/usr/local',
    cuda_toolkit_ldconfig_order='50', cuda_toolkit_ldconfig_lib_dirs=['lib64'], cuda_toolkit_verify=True,
    cuda_toolkit_verify_archs=['sm_90', 'sm_100', 'sm_120'], cuda_toolkit_verify_compile='auto',
    cuda_toolkit_command_timeout=3600, cuda_toolkit_host_compiler='', cuda_toolkit_host_compiler_packages=['g++'],
    inferops_proxy=MISSING, inferops_ca_bundle=MISSING,
    cuda_toolkit_apt_repo_url='https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/',
    cuda_toolkit_apt_key_url='https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub',
    cuda_toolkit_apt_key_content='', cuda_toolkit_apt_key_fingerprint='EB693B3035CD5710E231E123A4B469963BF863CC',
    cuda_toolkit_apt_package='cuda-toolkit-13-0', cuda_toolkit_pip_index_url='https://pypi.org/simple',
    cuda_toolkit_find_links=[], cuda_toolkit_pip_venv='/opt/inferops/cuda-toolkit-pip', cuda_toolkit_wheel_sets={},
    cuda_toolkit_runfile_url='', cuda_toolkit_runfile_path='', cuda_toolkit_runfile_checksum='',
    cuda_toolkit_runfile_download_dir='/var/cache/inferops/cuda',
    __cuda_toolkit_os_family='Debian', __cuda_toolkit_os_families=ROLE_VARS['__cuda_toolkit_os_families'],
    __cuda_toolkit_supported_archs=ROLE_VARS['__cuda_toolkit_supported_archs'],
    __cuda_toolkit_wheel_sets=ROLE_VARS['__cuda_toolkit_wheel_sets'],
    __cuda_toolkit_wheel_layouts=ROLE_VARS['__cuda_toolkit_wheel_layouts'],
    __cuda_toolkit_apt_distro='debian12', __cuda_toolkit_apt_distros=ROLE_VARS['__cuda_toolkit_apt_distros'],
    __cuda_toolkit_apt_arch_dirs=ROLE_VARS['__cuda_toolkit_apt_arch_dirs'],
    ansible_facts=facts('debian_bookworm_min'), inventory_hostname='node-1',
    **dict((name, MISSING) for name in ct.RETIRED))
WHEEL = {'name': 'nvidia-cuda-nvcc', 'version': '13.0.88', 'sha256': ['56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03']}


def problems(probes=None, **changed):
    assert set(changed) <= set(ct.NAMES)
    return run_checks(ct.CHECKS, dict(DEFAULTS, **changed), probes)


def test_defaults_pass_and_every_name_is_read():
    assert sorted(DEFAULTS) == sorted(ct.NAMES)
    assert problems() == []


def test_package_method_refused_where_nvidia_has_no_repository():
    # extensions/molecule/cuda_toolkit's Debian 13 host keeps this refusal's words.
    found = problems(ansible_facts=facts('debian_trixie_min'), __cuda_toolkit_apt_distro='debian13')
    assert found == ['cuda_toolkit_method = "package" is not allowed: a host NVIDIA\'s apt repository serves (ubuntu2204, '
                     'ubuntu2404, debian12 on aarch64, x86_64; this host: "debian13" on "x86_64"); choose cuda_toolkit_method '
                     'wheels, runfile or existing']
    assert problems(cuda_toolkit_method='wheels', ansible_facts=facts('debian_trixie_min'),
                    __cuda_toolkit_apt_distro='debian13') == []


@pytest.mark.parametrize('stat, verdict', [
    ({'changed': False, 'stat': {'exists': False}}, 'inferops_ca_bundle = "/srv/ca.crt" is not allowed: a file on node-1 '
     '(this path does not exist)'),
    ({'changed': False, 'stat': {'exists': True, 'isdir': True, 'isreg': False}}, 'this path is not a regular file'),
    ({'changed': False, 'stat': {'exists': True, 'isreg': True}}, None),
    ({'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False'}, None),
    (None, None),
])
def test_ca_bundle_stat(stat, verdict):
    probes = {} if stat is None else {'ca_bundle': stat}
    found = problems(probes, inferops_ca_bundle='/srv/ca.crt')
    if verdict is None:
        assert found == []
    else:
        assert len(found) == 1 and verdict in found[0], found


def test_ca_bundle_path_refused_once_whatever_its_stat():
    found = problems({'ca_bundle': {'stat': {'exists': False}}}, inferops_ca_bundle='certs/ca.crt')
    assert len(found) == 1 and found[0].startswith('inferops_ca_bundle = "certs/ca.crt" is not allowed')


@pytest.mark.parametrize('version', sorted(ROLE_VARS['__cuda_toolkit_wheel_sets']))
def test_pinned_wheel_sets_pass_the_modules_rules(version):
    assert problems(cuda_toolkit_method='wheels', cuda_toolkit_version=version,
                    cuda_toolkit_verify_archs=['sm_90']) == []


def test_a_broken_pinned_set_in_use_is_named_as_the_roles():
    pinned = dict(ROLE_VARS['__cuda_toolkit_wheel_sets'], **{'13.0': {'nvcc': True, 'layout': 'cu13', 'wheels': []}})
    found = problems(cuda_toolkit_method='wheels', __cuda_toolkit_wheel_sets=pinned)
    assert found == ['__cuda_toolkit_wheel_sets["13.0"].wheels = [] is not allowed: wheels must be a non-empty list of '
                     '{name, version, sha256} (got [])']
    assert problems(__cuda_toolkit_wheel_sets=pinned) == []


def test_wheel_set_keys_and_wheel_keys():
    # A YAML number key (13.0 unquoted) is shown as the number it is.
    found = problems(cuda_toolkit_wheel_sets={13.0: {'nvcc': True, 'layout': 'cu13', 'wheels': [WHEEL]}})
    assert found == ['cuda_toolkit_wheel_sets[13.0] = {"layout": "cu13", "nvcc": true, "wheels": [%s]} is not allowed: '
                     'a set keyed by a quoted "major.minor" version such as "13.0"' % json.dumps(WHEEL, sort_keys=True)]
    found = problems(cuda_toolkit_wheel_sets={'13.0': {'nvcc': True, 'layout': 'cu13', 'wheels': [dict(WHEEL, url='x')]}})
    assert len(found) == 1 and 'wheels[0] has keys beyond name, version, sha256' in found[0]
    found = problems(cuda_toolkit_wheel_sets={'13.0': {'nvcc': True, 'layout': 'cu13'}})
    assert len(found) == 1 and 'a mapping of exactly nvcc' in found[0]


@pytest.mark.parametrize('changed', [
    # 2.17 renders templates to strings, 2.21 to numbers and booleans.
    dict(cuda_toolkit_ldconfig_order=40, cuda_toolkit_command_timeout='600'),
    dict(cuda_toolkit_verify='False', cuda_toolkit_verify_archs=[]),
    dict(cuda_toolkit_verify_compile='none', cuda_toolkit_verify_archs=['sm_70']),
    dict(cuda_toolkit_wheel_sets={'13.0': {'nvcc': 'no', 'layout': 'cu13', 'wheels': [WHEEL]}}),
])
def test_rendered_forms_pass(changed):
    assert problems(**changed) == []


@pytest.mark.parametrize('changed, fragment', [
    (dict(cuda_toolkit_ldconfig_order=True), 'cuda_toolkit_ldconfig_order = true is not allowed'),
    (dict(cuda_toolkit_command_timeout=True), 'cuda_toolkit_command_timeout = true is not allowed'),
    (dict(cuda_toolkit_method='runfile', cuda_toolkit_runfile_url='https://example.invalid/cuda.run',
          cuda_toolkit_runfile_checksum='sha256:00', cuda_toolkit_runfile_path='/srv/cuda.run'),
     'cuda_toolkit_runfile_url = "https://example.invalid/cuda.run" is not allowed: exactly one of'),
    (dict(cuda_toolkit_method='runfile'), 'cuda_toolkit_runfile_url = "" is not allowed: exactly one of'),
    (dict(cuda_toolkit_method='wheels', cuda_toolkit_pip_index_url='', cuda_toolkit_find_links=[]),
     'cuda_toolkit_find_links = [] is not allowed'),
    (dict(cuda_toolkit_apt_key_url='mirror/key.asc'), 'cuda_toolkit_apt_key_url = "mirror/key.asc" is not allowed'),
])
def test_refused(changed, fragment):
    found = problems(**changed)
    assert len(found) == 1 and fragment in found[0], found


def test_key_content_stands_in_for_the_key_url():
    assert problems(cuda_toolkit_apt_key_url='', cuda_toolkit_apt_key_content='-----BEGIN PGP PUBLIC KEY BLOCK-----') == []


def test_retired_variables_are_named_never_shown():
    found = problems(cuda_toolkit_proxy={'https_proxy': 'http://user:secret@proxy:3128'})
    assert len(found) == 1 and found[0].startswith('cuda_toolkit_proxy (value hidden)') and 'secret' not in found[0]


@pytest.mark.parametrize('proxy, shown', [
    # Only the credentials are masked: the text around the URL, its scheme, host and port stay.
    ('https_proxy=http://user:secret@proxy:3128', '"https_proxy=http://***@proxy:3128"'),
    ({'https_proxy': 'http://user:secret@proxy:3128 x'}, '{"https_proxy": "http://***@proxy:3128 x"}'),
    # A proxy URL has no path: an unencoded / in the password is masked with the rest of it.
    ({'https_proxy': 'http://user:pa/ss@proxy:3128\n'}, '{"https_proxy": "http://***@proxy:3128\\n"}'),
    ({'http_proxy': 'user:secret@proxy:3128'}, '{"http_proxy": "***@proxy:3128"}'),
])
def test_a_proxys_credentials_are_masked_not_its_host(proxy, shown):
    found = problems(inferops_proxy=proxy)
    assert len(found) == 1 and found[0].startswith('inferops_proxy = %s is not allowed' % shown), found
    assert 'secret' not in found[0] and 'pa/ss' not in found[0]
