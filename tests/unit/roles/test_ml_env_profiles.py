# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The built-in SGLang profiles as data: each passes the role's own checks, its imports expect what
its pins install, the PyPI equivalents tools/lock-check.sh resolves are the profiles' pins, and the
fact ml_env_sglang_version names the sglang the current release pins.

The pins themselves were read from the wheels (sglang 0.5.23's METADATA: torch==2.14.1,
sglang-kernel==0.4.10, flashinfer_python[cu13]==0.7.2); the rules' own cases are in
tests/unit/plugins/module_utils/test_ml_env_stack.py.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import sys

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'unit', 'plugins', 'lookup'))
import input_cases  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.inferops.gpu.plugins.lookup import input_problems  # noqa: E402
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env import validate as ml_env_input  # noqa: E402
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import run_checks  # noqa: E402
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.stack import normalize_name, split_local  # noqa: E402

ROLE_VARS = os.path.join(ROOT, 'roles', 'ml_env', 'vars', 'main.yml')
LOCK_FILES = sorted(glob.glob(os.path.join(ROOT, 'tools', 'lock-*-pypi.yml')))
PYTHON = {'stat': {'exists': True, 'isreg': True, 'isdir': False, 'islnk': False, 'executable': True}}
# The import each profile verifies, and the distribution that installs it (both names of the kernel).
IMPORTED_FROM = {'torch': ('torch',), 'sgl_kernel': ('sgl-kernel', 'sglang-kernel'), 'flashinfer': ('flashinfer-python',),
                 'flashinfer_cubin': ('flashinfer-cubin',), 'sglang': ('sglang',)}


def role_vars():
    with open(ROLE_VARS) as handle:
        return yaml.safe_load(handle)


def sglang_profiles():
    return sorted(name for name, profile in role_vars()['__ml_env_builtin_profiles'].items()
                  if 'sglang' in (profile.get('packages') or {}))


def answered(version):
    return {'python_stat': PYTHON, 'python_run': {'changed': False, 'rc': 0, 'stdout': version + '\n', 'stderr': ''}}


def check(probes=None, **case_vars):
    evaluation = input_cases.Evaluation({'role': 'ml_env', 'vars': dict(input_cases.REQUIRED, **case_vars)})
    assert not evaluation.spec_errors and not evaluation.render_failures
    return run_checks(ml_env_input.CHECKS, evaluation.values, probes or {})


def test_both_sglang_releases_are_built_in():
    assert sglang_profiles() == ['sglang-0.5.23-cu130', 'sglang-0.5.9-cu130']
    current = role_vars()['__ml_env_builtin_profiles']['sglang-0.5.23-cu130']
    assert current['packages'] == {'torch': '2.14.1', 'sglang-kernel': '0.4.10', 'flashinfer-python': '0.7.2',
                                   'flashinfer-cubin': '0.7.2', 'sglang': '0.5.23'}
    assert current['cuda_major'] == 13


@pytest.mark.parametrize('profile', ['sglang-0.5.23-cu130', 'sglang-0.5.9-cu130'])
def test_a_built_in_profile_passes_the_role_checks(profile):
    assert check(answered('3.12'), ml_env_profile=profile) == []


def test_the_current_profile_refuses_a_python_without_sglang_wheels():
    assert check(answered('3.10'), ml_env_profile='sglang-0.5.23-cu130') == [
        'ml_env_python_interpreter = "/usr/bin/python3" is not allowed: rule python-supported failed: '
        'Python 3.10 is not supported by this stack (allowed: 3.11, 3.12, 3.13)']


# flashinfer 0.6 refuses to import beside a cubin of another version; 0.7 ignores such a cubin, so the
# current profile imports the cubin itself.
@pytest.mark.parametrize('profile, not_imported', [('sglang-0.5.23-cu130', []), ('sglang-0.5.9-cu130', ['flashinfer-cubin'])])
def test_the_imports_expect_what_the_pins_install(profile, not_imported):
    stack = role_vars()['__ml_env_builtin_profiles'][profile]
    pins = dict((normalize_name(name), str(version)) for name, version in stack['packages'].items())
    checked = []
    for entry in stack['imports']:
        dists = [dist for dist in IMPORTED_FROM[entry['name']] if dist in pins]
        assert len(dists) == 1, entry
        # torch's wheel reports a local label (2.14.1+cu130) that PyPI's metadata does not carry.
        assert split_local(entry['version'])[0] == split_local(pins[dists[0]])[0], entry
        checked.append(dists[0])
    assert sorted(checked + not_imported) == sorted(pins)


def lock_check_values(path, profile=None):
    """What the role's checks see in tools/lock-check.sh's run of playbooks/lock.yml with `-e @path`."""
    name = os.path.basename(path)[len('lock-'):-len('.yml')]
    variables = input_cases.host_variables('ml_env', dict(input_cases.REQUIRED), input_cases.facts())
    # -e: above role vars, and lock.yml's import of validate.yml.
    variables.update(input_cases.load_yaml(path))
    variables.update(input_cases.trusted({'ml_env_profile': profile or name, '__ml_env_making_lock': True}))
    templar = Templar(loader=DataLoader(), variables=variables)
    values, failures = input_problems.render(ml_env_input.NAMES, variables, templar.template)
    assert failures == []
    return name, values


@pytest.mark.parametrize('path', LOCK_FILES, ids=os.path.basename)
def test_a_pypi_equivalent_is_its_profile_without_local_versions(path):
    name, values = lock_check_values(path)
    assert run_checks(ml_env_input.CHECKS, values, answered('3.11')) == []
    pypi = values['ml_env_profiles'][name]
    builtin = name.replace('-pypi', '-cu130') if name.startswith('sglang-') else 'sglang-0.5.9-cu130'
    pins = values['__ml_env_builtin_profiles'][builtin]['packages']
    left_out = set(pins) - set(pypi['packages'])
    assert dict((pin, str(version).split('+', maxsplit=1)[0]) for pin, version in pins.items() if pin not in left_out) == pypi['packages']
    assert pypi['index_url'] == 'https://pypi.org/simple' and not pypi.get('extra_index_urls')
    assert left_out <= {'flashinfer-cubin'}


def test_the_current_pypi_equivalent_leaves_out_only_the_cubin_and_its_pairing_rule():
    path = os.path.join(ROOT, 'tools', 'lock-sglang-0.5.23-pypi.yml')
    name, values = lock_check_values(path)
    assert values['ml_env_profiles'][name]['packages'] == {'torch': '2.14.1', 'sglang-kernel': '0.4.10',
                                                           'flashinfer-python': '0.7.2', 'sglang': '0.5.23'}
    own = role_vars()['__ml_env_rules']
    assert values['__ml_env_rules'] == [rule for rule in own if rule['name'] != 'flashinfer-python-matches-cubin']
    # With every rule of the role, the pin set without its cubin is refused by that rule alone.
    values = dict(values, __ml_env_rules=own)
    found = run_checks(ml_env_input.CHECKS, values, answered('3.11'))
    assert len(found) == 1 and 'rule flashinfer-python-matches-cubin failed' in found[0], found


def fact_task():
    with open(os.path.join(ROOT, 'roles', 'ml_env', 'tasks', 'main.yml')) as handle:
        tasks = yaml.safe_load(handle)
    return [task for task in tasks if task['name'] == 'Publish the facts of the current release'][0]


def sglang_version(pins, rollback=False, rolled_back=None):
    task = fact_task()
    variables = input_cases.trusted(dict(task['vars'], __ml_env_pins=pins, ml_env_rollback=rollback))
    # What the slurp registered: the release's pins.json, or (None) a failure it tolerates.
    variables['__ml_env_rolled_back'] = {'failed': True, 'msg': 'file not found'}
    if rolled_back is not None:
        content = base64.b64encode(json.dumps({'packages': rolled_back}).encode()).decode()
        variables['__ml_env_rolled_back'] = {'content': content}
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(input_cases.trusted(task['ansible.builtin.set_fact']['ml_env_sglang_version']))


@pytest.mark.parametrize('pins, version', [
    ({'torch': '2.14.1', 'sglang-kernel': '0.4.10', 'sglang': '0.5.23'}, '0.5.23'),
    ({'SGLang': '0.5.24+cu130'}, '0.5.24'),
    ({'sglang': '1.0'}, '1.0'),
    ({'torch': '2.9.1', 'sglang-router': '0.2.1'}, ''),
    ({}, ''),
])
def test_the_sglang_version_fact_names_the_pinned_sglang(pins, version):
    found = sglang_version(pins)
    assert found == version and isinstance(found, str)


def test_after_a_rollback_the_fact_names_the_release_rolled_back_to():
    assert sglang_version({'sglang': '0.5.23'}, rollback=True, rolled_back={'sglang': '0.5.9'}) == '0.5.9'
    assert sglang_version({'sglang': '0.5.23'}, rollback='false', rolled_back={'sglang': '0.5.9'}) == '0.5.23'
    assert sglang_version({'sglang': '0.5.23'}, rollback=True, rolled_back={}) == ''
    # A release without pins.json: nothing known, not the profile's version.
    assert sglang_version({'sglang': '0.5.23'}, rollback=True) == ''


def test_the_fact_is_documented_and_set_with_the_others():
    assert set(fact_task()['ansible.builtin.set_fact']) == {
        'ml_env_python', 'ml_env_release', 'ml_env_previous_release', 'ml_env_managed_paths', 'ml_env_sglang_version'}
    with open(os.path.join(ROOT, 'roles', 'ml_env', 'README.md')) as handle:
        readme = handle.read()
    assert '`ml_env_sglang_version`' in readme and 'sglang-0.5.23-cu130' in readme
