# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ml_env's checks of the names and versions of the pins (issue 41), beside the cases of
tests/bad_inputs/ml_env.yml: names compare as PEP 503 names, one distribution is pinned once, and
ml_env_extra_packages adds pins without moving the profile's or what its imports expect."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'lookup'))
import input_cases  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.inferops.gpu.plugins.module_utils.ml_env import validate as ml_env_input  # noqa: E402
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import run_checks  # noqa: E402

HASH = '--hash=sha256:' + 'a' * 64


def problems(probes=None, **case_vars):
    evaluation = input_cases.Evaluation({'role': 'ml_env', 'vars': dict(input_cases.REQUIRED, **case_vars)})
    assert not evaluation.spec_errors and not evaluation.render_failures
    return run_checks(ml_env_input.CHECKS, evaluation.values, probes or {})


def custom(profile, probes=None, **case_vars):
    return problems(probes, ml_env_profile='custom', ml_env_profiles={'custom': profile}, **case_vars)


def test_a_profile_that_pins_torch_twice_is_refused_once_naming_both_spellings():
    assert custom({'packages': {'torch': '2.9.1+cu130', 'Torch': '2.9.1+cu130'}}) == [
        'ml_env_profiles["custom"].packages["Torch"] = "2.9.1+cu130" is not allowed: one pin per distribution: "Torch" and '
        '"torch" are one name as PEP 503 compares names (torch), and ml_env_profiles["custom"].packages["torch"] pins it already']


@pytest.mark.parametrize('first, second', [('typing_extensions', 'typing-extensions'), ('a.b', 'a-b'), ('A_B', 'a.b'),
                                           ('zope.interface', 'Zope_Interface')])
def test_every_pep503_spelling_of_one_name_is_one_distribution(first, second):
    found = custom({'packages': {first: '1.0', second: '1.0'}})
    assert len(found) == 1 and found[0].startswith('ml_env_profiles["custom"].packages["%s"] = "1.0" is not allowed' % second)
    assert '"%s" and "%s" are one name' % (second, first) in found[0]


def test_an_override_of_a_pin_spelled_otherwise_carries_the_pins_version():
    pins = {'flashinfer-python': '0.6.4', 'flashinfer-cubin': '0.6.4'}
    assert custom({'packages': pins, 'overrides': {'flashinfer_python': '0.6.3'}}) == [
        'ml_env_profiles["custom"].overrides["flashinfer_python"] = "0.6.3" is not allowed: the version the profile pins it '
        'at, 0.6.4 (ml_env_profiles["custom"].packages["flashinfer-python"]): "flashinfer_python" and "flashinfer-python" are '
        'one name as PEP 503 compares names (flashinfer-python); spelled two ways, uv would get both']
    # Spelled alike, the pin replaces the override (every pin is an override); at the pin's version, uv gets one version.
    assert custom({'packages': pins, 'overrides': {'flashinfer-python': '0.6.3'}}) == []
    assert custom({'packages': pins, 'overrides': {'Flashinfer_Python': '0.6.4'}}) == []


def test_an_extra_pin_that_moves_the_profiles_pin_names_the_profiles_pin():
    assert problems(ml_env_profile='sglang-0.5.23-cu130', ml_env_extra_packages={'Flashinfer_Python': '0.7.1', 'six': '1.17.0'}) == [
        'ml_env_extra_packages["Flashinfer_Python"] = "0.7.1" is not allowed: the profile\'s own version of flashinfer-python, '
        '0.7.2 (ml_env_profiles["sglang-0.5.23-cu130"].packages["flashinfer-python"]), or a distribution the profile does not '
        'pin: extra pins add to the profile\'s, they do not move them (to move one, make a profile in ml_env_profiles); names '
        'compare as PEP 503 names',
        # flashinfer-cubin stays at 0.7.2: the rule sees the pin set uv would get.
        'ml_env_extra_packages = {"Flashinfer_Python": "0.7.1", "six": "1.17.0"} is not allowed: rule '
        'flashinfer-python-matches-cubin failed: flashinfer-python and flashinfer-cubin must carry the same version; the pin '
        'set has flashinfer-python 0.7.1, flashinfer-cubin 0.7.2']


@pytest.mark.parametrize('extra', [
    {'torch': '2.14.1'}, {'Torch': '2.14.1'}, {'SGLang_Kernel': '0.4.10', 'sglang': '0.5.23'},
    {'flashinfer-jit-cache': '0.7.2+cu130', 'requests': '2.32.3'}])
def test_the_profiles_own_pins_again_and_new_pins_pass(extra):
    assert problems(ml_env_profile='sglang-0.5.23-cu130', ml_env_extra_packages=extra) == []


@pytest.mark.parametrize('pin, expected, accepted', [
    ('2.9.1+cu130', '2.9.1+cu130', True), ('2.9.1', '2.9.1+cu130', True), ('2.9.1+cu131', '2.9.1+cu130', False),
    ('2.9.0', '2.9.*', True), ('2.8.0', '2.9.*', False), ('0.3.21+cu130', '0.3.21', True), ('0.3.20', '0.3.21', False),
    ('1.0', '*', True)])
def test_an_extra_pin_against_what_the_profiles_import_expects(pin, expected, accepted):
    profile = {'packages': {'six': '1.17.0'}, 'imports': [{'name': 'six'}, {'name': 'torch', 'version': expected}]}
    found = custom(profile, ml_env_extra_packages={'Torch': pin})
    assert found == ([] if accepted else [
        'ml_env_extra_packages["Torch"] = "%s" is not allowed: a version the profile\'s import check accepts: '
        'ml_env_profiles["custom"].imports[1] expects torch %s; names compare as PEP 503 names' % (pin, expected)])


def test_the_lock_holds_the_pins_under_any_spelling():
    lock = 'Six==1.17.0 %s\nidna==3.10 %s\n' % (HASH, HASH)
    profile = {'packages': {'six': '1.17.0'}, 'lock': '/srv/six.txt'}
    assert custom(profile, {'lock': {'content': lock}}, ml_env_extra_packages={'IDNA': '3.10'}) == []
    assert custom(profile, {'lock': {'content': lock}}, ml_env_extra_packages={'IDNA': '3.9'}) == [
        'ml_env_profiles["custom"].lock = "/srv/six.txt" is not allowed: a lock of exactly the pins, every requirement with a '
        'hash (the profile pins IDNA 3.9; /srv/six.txt has IDNA==3.10: make the lock again from these pins)']
