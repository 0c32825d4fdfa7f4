# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What tests/bad_inputs/ml_env.yml does not pin: the probes' verdicts with results recorded on a
Debian 12 host, the lock against the pins, the rules judged with the interpreter's version, and
the variable a failed rule names."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'lookup'))
import input_cases  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.inferops.gpu.plugins.module_utils.ml_env import validate as ml_env_input  # noqa: E402
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import run_checks  # noqa: E402

HASH = '--hash=sha256:' + 'a' * 64
# Recorded with ansible.builtin.stat / command on Debian 12 (the fields the checks read).
MISSING_STAT = {'stat': {'exists': False}}
DIRECTORY = {'stat': {'exists': True, 'isreg': False, 'isdir': True, 'islnk': False, 'executable': True}}
REGULAR = {'stat': {'exists': True, 'isreg': True, 'isdir': False, 'islnk': False, 'executable': False}}
LINK = {'stat': {'exists': True, 'isreg': False, 'isdir': False, 'islnk': True, 'executable': True}}
PYTHON = {'stat': {'exists': True, 'isreg': True, 'isdir': False, 'islnk': False, 'executable': True}}
SKIPPED = {'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False'}


def problems(probes=None, **case_vars):
    evaluation = input_cases.Evaluation({'role': 'ml_env', 'vars': dict(input_cases.REQUIRED, **case_vars)})
    assert not evaluation.spec_errors and not evaluation.render_failures
    return run_checks(ml_env_input.CHECKS, evaluation.values, probes or {})


def run(stdout, rc=0, stderr=''):
    return {'changed': False, 'rc': rc, 'stdout': stdout, 'stderr': stderr}


@pytest.mark.parametrize('stat, found', [
    (DIRECTORY, 'ml_env_path = "/opt/ml-env" is not allowed: it exists on inferops-badin-1 and is not a symlink'),
    (LINK, None), (MISSING_STAT, None), (SKIPPED, None)])
def test_ml_env_path_a_link_or_absent(stat, found):
    assert [text[:len(found or '')] for text in problems({'path_stat': stat})] == ([found] if found else [])


@pytest.mark.parametrize('stat, found', [
    (MISSING_STAT, 'inferops_ca_bundle = "/etc/ca.pem" is not allowed: a file on inferops-badin-1 (this path does not exist)'),
    (DIRECTORY, 'inferops_ca_bundle = "/etc/ca.pem" is not allowed: a file on inferops-badin-1 (this path is not a regular file)'),
    (REGULAR, None), (SKIPPED, None)])
def test_ca_bundle_a_file_on_the_host(stat, found):
    assert problems({'ca_bundle': stat}, inferops_ca_bundle='/etc/ca.pem') == ([found] if found else [])


def test_ca_bundle_stat_of_a_refused_path_gives_no_second_verdict():
    found = problems({'ca_bundle': MISSING_STAT}, inferops_ca_bundle='etc/ca.pem')
    assert len(found) == 1 and found[0].startswith('inferops_ca_bundle = "etc/ca.pem" is not allowed: "" (each tool'), found


@pytest.mark.parametrize('answer, why', [
    (run('2.7'), 'did not run as Python 3 (rc=0): it printed "2.7"'),
    (run('', 1, 'Traceback (most recent call last):\nModuleNotFoundError: No module named \'venv\''),
     "did not run as Python 3 (rc=1): ModuleNotFoundError: No module named 'venv'"),
    (run('x' * 100), 'it printed "%s..."' % ('x' * 77))])
def test_interpreter_that_is_no_python_3(answer, why):
    found = problems({'python_stat': PYTHON, 'python_run': answer})
    assert len(found) == 1 and found[0].startswith('ml_env_python_interpreter = "/usr/bin/python3" is not allowed: '), found
    assert why in found[0]


def test_interpreter_that_runs_and_a_probe_that_is_missing():
    assert problems({'python_stat': PYTHON, 'python_run': run('3.11\n')}) == []
    assert problems({'python_stat': SKIPPED, 'python_run': SKIPPED}) == []
    assert problems({'python_stat': PYTHON}) == []


def test_the_rules_judge_the_interpreter_version_when_its_probe_answered():
    found = problems({'python_stat': PYTHON, 'python_run': run('3.9')})
    assert found == ['ml_env_python_interpreter = "/usr/bin/python3" is not allowed: rule python-supported failed: '
                     'Python 3.9 is not supported by this stack (allowed: 3.10, 3.11, 3.12, 3.13)']


def test_a_failed_rule_names_the_variable_behind_it():
    # cuda_toolkit ran: its fact is the version; the profile's +cu130 pins are for another major.
    found = problems(cuda_toolkit_version_installed='12.8')
    assert 'cuda_toolkit_version_installed = "12.8" is not allowed: rule profile-cuda-major-matches-toolkit failed' in found[-1]
    assert found[0].startswith('ml_env_profiles["sglang-0.5.9-cu130"].packages = {') and \
        'rule cuda-local-tag-matches-toolkit failed' in found[0], found


LOCKED = {'ml_env_profile': 'custom', 'ml_env_profiles': {'custom': {'packages': {'six': '1.17.0'}, 'lock': '/locks/six.txt'}}}


@pytest.mark.parametrize('content, found', [
    ('six==1.17.0 \\\n    %s\n' % HASH, []),
    ('six==1.16.0 %s\n' % HASH, ['ml_env_profiles["custom"].lock = "/locks/six.txt" is not allowed: a lock of exactly the pins, '
                                 'every requirement with a hash (the profile pins six 1.17.0; /locks/six.txt has six==1.16.0: '
                                 'make the lock again from these pins)']),
    ('six==1.17.0\n', ['ml_env_profiles["custom"].lock = "/locks/six.txt" is not allowed: a lock of exactly the pins, every '
                       'requirement with a hash (/locks/six.txt line 1: six==1.17.0 has no --hash (make the lock with hashes: '
                       'make lock, or uv pip compile --generate-hashes))'])])
def test_lock_against_the_pins(content, found):
    assert problems({'lock': {'content': content}}, **LOCKED) == found


@pytest.mark.parametrize('nccl, found', [
    ('2.27.5', []),
    ('2.26.2', ['ml_env_profiles["custom"].lock = "/locks/six.txt" is not allowed: rule nccl-newer-than-2.26.2 failed: '
                'nvidia-nccl-cu12 must be newer than 2.26.2; /locks/six.txt has nvidia-nccl-cu12 2.26.2'])])
def test_the_nccl_floor_judges_what_the_lock_resolved(nccl, found):
    # No pin names NCCL (torch brings it): only the lock says which one every node installs.
    content = 'six==1.17.0 %s\nnvidia-nccl-cu12==%s %s\n' % (HASH, nccl, HASH)
    assert problems({'lock': {'content': content}}, **LOCKED) == found


def test_the_nccl_floor_judges_an_override_no_pin_replaces():
    profile = {'packages': {'six': '1.17.0'}, 'overrides': {'nvidia-nccl-cu13': '2.26.2', 'six': '1.16.0'}}
    assert problems(ml_env_profile='custom', ml_env_profiles={'custom': profile}) == [
        'ml_env_profiles["custom"].overrides = {"nvidia-nccl-cu13": "2.26.2", "six": "1.16.0"} is not allowed: rule '
        'nccl-newer-than-2.26.2 failed: nvidia-nccl-cu13 must be newer than 2.26.2; the override set has '
        'nvidia-nccl-cu13 2.26.2']
    # A pin replaces the override (every pin is an override too): the pin is what is judged.
    found = problems(ml_env_profile='custom', ml_env_profiles={'custom': profile},
                     ml_env_extra_packages={'nvidia-nccl-cu13': '2.28.9'})
    assert found == []


def test_lock_not_judged_while_it_is_made_or_without_its_read():
    assert problems({'lock': {'content': ''}}, __ml_env_making_lock=True, **LOCKED) == []
    assert problems({}, **LOCKED) == []
    # A profile without a lock: what was read (nothing) is not judged.
    assert problems({'lock': {'content': ''}}) == []


def test_extension_globs_and_strings_as_2_17_renders_them():
    assert problems(ml_env_extension_globs=['torch/_C*.so\n']) == [
        'ml_env_extension_globs = ["torch/_C*.so\\n"] is not allowed: globs without control characters']
    assert problems(ml_env_keep_releases='3', ml_env_command_timeout='600') == []
    assert problems(ml_env_keep_releases='0') == ['ml_env_keep_releases = "0" is not allowed: keep at least 1 release (the current one)']


def test_a_bad_root_is_named_once():
    assert problems(ml_env_root='/') == ['ml_env_root = "/" is not allowed: an absolute path other than /']
    assert problems(ml_env_root='//') == ['ml_env_root = "//" is not allowed: an absolute path other than /']
    assert problems(ml_env_path='/opt') == ['ml_env_path = "/opt" is not allowed: an absolute path outside ml_env_root']
