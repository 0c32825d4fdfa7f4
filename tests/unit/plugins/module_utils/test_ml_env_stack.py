# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.lock import lock_packages
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.stack import (
    cuda_major_of_tag,
    cuda_version_problem,
    evaluate_rules,
    floor_results,
    normalize_name,
    pin_problems,
    version_matches,
    version_newer,
    versions_equal,
)

ROLE_VARS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..',
                         'roles', 'ml_env', 'vars', 'main.yml')
LOCKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'locks')
FIELD_NOTES_PINS = {
    'torch': '2.9.1+cu130', 'sgl-kernel': '0.3.21+cu130', 'flashinfer-python': '0.6.4',
    'flashinfer-cubin': '0.6.4', 'sglang': '0.5.9',
}
# sglang 0.5.23's metadata: torch==2.14.1, sglang-kernel==0.4.10, flashinfer_python[cu13]==0.7.2.
CURRENT_PINS = {
    'torch': '2.14.1', 'sglang-kernel': '0.4.10', 'flashinfer-python': '0.7.2',
    'flashinfer-cubin': '0.7.2', 'sglang': '0.5.23',
}


def role_rules(profile):
    with open(ROLE_VARS) as handle:
        data = yaml.safe_load(handle)
    stack = data['__ml_env_builtin_profiles'][profile]
    # As the role does: the profile's target CUDA major becomes a rule of its own.
    major = [{'name': 'profile-cuda-major-matches-toolkit', 'kind': 'cuda_major', 'major': str(stack['cuda_major'])}]
    return data['__ml_env_rules'] + stack.get('rules', []) + major


def failed(results):
    return dict((r['name'], r['message']) for r in results if not r['ok'])


@pytest.mark.parametrize('version, pattern, expected', [
    ('2.9.1+cu130', '2.9.*', True),
    ('2.10.0+cu130', '2.9.*', False),
    ('2.9', '2.9.*', True),
    ('0.3.21+cu130', '0.3.21', True),
    ('0.3.21+cu130', '0.3.21+cu128', False),
    ('0.3.21+cu130', '0.3.21+cu130', True),
    ('0.3.210', '0.3.21', False),
    (None, '1', False),
])
def test_version_matches(version, pattern, expected):
    assert version_matches(version, pattern) is expected


def test_versions_equal_and_names():
    assert versions_equal('2.9.1+CU130', '2.9.1+cu130')
    assert not versions_equal('2.9.1', '2.9.1+cu130')
    assert normalize_name('Flashinfer_Python') == 'flashinfer-python'


@pytest.mark.parametrize('version, major', [('2.9.1+cu130', 13), ('0.3.21+cu128', 12), ('1.0+cpu', None),
                                            ('1.0', None), ('2.0+cu118.post1', 11)])
def test_cuda_major_of_tag(version, major):
    assert cuda_major_of_tag(version) == major


def test_pin_problems_name_the_bad_pin():
    assert pin_problems({'torch': '2.9.1+cu130', 'six': '1.17.0'}) == []
    problems = pin_problems({'torch': '>=2.9', 'bad name!': '1.0'}, label='ml_env_profiles.x.packages')
    assert any("torch '>=2.9' is not an exact version" in p for p in problems)
    assert any("'bad name!' is not a distribution name" in p for p in problems)


def test_the_field_notes_stack_passes_its_own_rules():
    assert failed(evaluate_rules(role_rules('sglang-0.5.9-cu130'), FIELD_NOTES_PINS, '13.0', '3.12.3')) == {}


@pytest.mark.parametrize('change, rule, words', [
    ({'torch': '2.10.0+cu130'}, 'sgl-kernel-0.3.21-needs-torch-2.9', 'the pin set has torch 2.10.0+cu130'),
    ({'flashinfer-cubin': '0.6.3'}, 'flashinfer-python-matches-cubin', 'flashinfer-cubin 0.6.3'),
    ({'sgl-kernel': '0.3.21+cu128'}, 'cuda-local-tag-matches-toolkit', 'sgl-kernel 0.3.21+cu128 is built'),
])
def test_a_broken_field_notes_stack_names_the_rule(change, rule, words):
    pins = dict(FIELD_NOTES_PINS, **change)
    problems = failed(evaluate_rules(role_rules('sglang-0.5.9-cu130'), pins, '13.0', '3.12.3'))
    assert list(problems) == [rule]
    assert words in problems[rule]


def test_the_current_stack_passes_its_own_rules():
    assert failed(evaluate_rules(role_rules('sglang-0.5.23-cu130'), CURRENT_PINS, '13.0', '3.12.3')) == {}
    # The jit-cache is optional; pinned, it carries flashinfer-python's version with its CUDA label.
    pins = dict(CURRENT_PINS, **{'flashinfer-jit-cache': '0.7.2+cu130'})
    assert failed(evaluate_rules(role_rules('sglang-0.5.23-cu130'), pins, '13.0', '3.12.3')) == {}


@pytest.mark.parametrize('change, rule, words', [
    # sglang-kernel 0.4.10 requires torch==2.14.1, which the torch pin overrides.
    ({'torch': '2.14.0'}, 'sglang-kernel-0.4.10-needs-torch-2.14.1',
     'sglang-kernel 0.4.10 needs torch 2.14.1; the pin set has torch 2.14.0'),
    ({'torch': '2.15.0+cu130'}, 'sglang-kernel-0.4.10-needs-torch-2.14.1', 'the pin set has torch 2.15.0+cu130'),
    # sglang 0.5.23 requires sglang-kernel==0.4.10.
    ({'sglang-kernel': '0.4.9'}, 'sglang-0.5.23-needs-sglang-kernel-0.4.10',
     'sglang 0.5.23 needs sglang-kernel 0.4.10; the pin set has sglang-kernel 0.4.9'),
    ({'flashinfer-cubin': '0.7.1'}, 'flashinfer-python-matches-cubin', 'flashinfer-cubin 0.7.1'),
    ({'flashinfer-jit-cache': '0.7.1+cu130'}, 'flashinfer-jit-cache-matches-python',
     'flashinfer-python and flashinfer-jit-cache must carry the same version; the pin set has flashinfer-python 0.7.2, '
     'flashinfer-jit-cache 0.7.1+cu130'),
    ({'flashinfer-jit-cache': '0.7.2+cu128'}, 'cuda-local-tag-matches-toolkit', 'flashinfer-jit-cache 0.7.2+cu128 is built'),
])
def test_a_broken_current_stack_names_the_rule(change, rule, words):
    pins = dict(CURRENT_PINS, **change)
    problems = failed(evaluate_rules(role_rules('sglang-0.5.23-cu130'), pins, '13.0', '3.12.3'))
    assert list(problems) == [rule]
    assert words in problems[rule]


def test_the_kernel_rules_know_both_names_of_the_kernel_package():
    # The old name under the new sglang: the kernel of the new name is missing, the old one needs its torch.
    pins = dict(CURRENT_PINS, **{'sgl-kernel': '0.3.21'})
    del pins['sglang-kernel']
    problems = failed(evaluate_rules(role_rules('sglang-0.5.23-cu130'), pins, '13.0', '3.12.3'))
    assert problems == {
        'sgl-kernel-0.3.21-needs-torch-2.9': 'sgl-kernel 0.3.21 needs torch 2.9.*; the pin set has torch 2.14.1',
        'sglang-0.5.23-needs-sglang-kernel-0.4.10': 'sglang 0.5.23 needs sglang-kernel 0.4.10; the pin set has no sglang-kernel'}
    # The new name is one PEP 503 name however it is spelled; the 0.3.21 rule does not judge it.
    for spelling in ('sglang_kernel', 'SGLang-Kernel', 'sglang.kernel'):
        pins = dict((k, v) for k, v in CURRENT_PINS.items() if k != 'sglang-kernel')
        pins.update({spelling: '0.4.10+cu130', 'torch': '2.9.1+cu130'})
        problems = failed(evaluate_rules(role_rules('sglang-0.5.23-cu130'), pins, '13.0', '3.12.3'))
        assert list(problems) == ['sglang-kernel-0.4.10-needs-torch-2.14.1'], spelling
    assert normalize_name('sglang_kernel') == 'sglang-kernel' != normalize_name('sgl_kernel')


def test_the_current_stack_on_another_python_or_toolkit():
    problems = failed(evaluate_rules(role_rules('sglang-0.5.23-cu130'), CURRENT_PINS, '13.0', '3.10.12'))
    assert problems == {'python-supported': 'Python 3.10.12 is not supported by this stack (allowed: 3.11, 3.12, 3.13)'}
    # No pin carries a local label (PyPI's builds are the CUDA 13 ones): only the profile's major says so.
    problems = failed(evaluate_rules(role_rules('sglang-0.5.23-cu130'), CURRENT_PINS, '12.8', '3.12.3'))
    assert list(problems) == ['profile-cuda-major-matches-toolkit']


def test_cuda_rules_against_another_toolkit():
    problems = failed(evaluate_rules(role_rules('sglang-0.5.9-cu130'), FIELD_NOTES_PINS, '12.8', '3.12.3'))
    assert set(problems) == {'cuda-local-tag-matches-toolkit', 'profile-cuda-major-matches-toolkit'}
    assert 'sgl-kernel 0.3.21+cu130, torch 2.9.1+cu130 are built' in problems['cuda-local-tag-matches-toolkit']


def test_unsupported_python_names_the_rule():
    problems = failed(evaluate_rules(role_rules('sglang-0.5.9-cu130'), FIELD_NOTES_PINS, '13.0', '3.9.18'))
    assert problems == {'python-supported': 'Python 3.9.18 is not supported by this stack '
                                            '(allowed: 3.10, 3.11, 3.12, 3.13)'}


def test_rules_that_do_not_apply_pass():
    rules = [{'name': 'r', 'kind': 'requires', 'package': 'sgl-kernel', 'version': '0.3.21',
              'needs': {'package': 'torch', 'version': '2.9.*'}},
             {'name': 's', 'kind': 'same_version', 'packages': ['a', 'b'], 'require_all': True}]
    assert failed(evaluate_rules(rules, {'sgl-kernel': '0.3.20'}, None, '3.11.2')) == {}
    assert failed(evaluate_rules(rules, {'sgl_kernel': '0.3.21'}, None, '3.11.2')) == {
        'r': 'sgl-kernel 0.3.21 needs torch 2.9.*; the pin set has no torch'}
    assert 'must be pinned together' in failed(evaluate_rules(rules, {'a': '1'}, None, '3.11'))['s']


def test_unknown_rule_kind_fails_by_name():
    assert 'unknown rule kind' in failed(evaluate_rules([{'name': 'x', 'kind': 'nope'}], {}, None, '3.11'))['x']


@pytest.mark.parametrize('pins, words', [
    ({'six\n': '1.17.0'}, "'six\\n' is not a distribution name"),
    ({'six': '1.17.0\n'}, "six '1.17.0\\n' is not an exact version"),
])
def test_a_trailing_newline_is_not_a_pin(pins, words):
    assert any(words in problem for problem in pin_problems(pins))


@pytest.mark.parametrize('version, floor, newer', [
    ('2.27.5', '2.26.2', True),
    ('2.26.5', '2.26.2', True),
    ('2.30.7+cu130', '2.26.2', True),
    ('2.27.0rc1', '2.26.2', True),
    ('1!1.0', '2.26.2', True),
    ('2.26.2', '2.26.2', False),
    ('2.26.2.0', '2.26.2', False),
    # PEP 440's >2.26.2 leaves out the post-releases and local labels of 2.26.2 itself.
    ('2.26.2.post1', '2.26.2', False),
    ('2.26.2+cu12', '2.26.2', False),
    ('2.26.2rc1', '2.26.2', False),
    ('2.25.1', '2.26.2', False),
    # Numbers, not text: '2.9.6' > '2.26.2' as strings.
    ('2.9.6', '2.26.2', False),
    ('latest', '2.26.2', False),
    (None, '2.26.2', False),
])
def test_version_newer(version, floor, newer):
    assert version_newer(version, floor) is newer


# The NCCL that torch's own wheels pin (their metadata), and the NCCL of the Blackwell reports.
NCCL_OF_TORCH = [('nvidia-nccl-cu12', '2.27.5'),   # torch 2.9.1 on PyPI (cu128)
                 ('nvidia-nccl-cu13', '2.28.9'),   # torch 2.11.0
                 ('nvidia-nccl-cu13', '2.30.7')]   # torch 2.14.1


@pytest.mark.parametrize('package, version', NCCL_OF_TORCH)
def test_the_nccl_floor_passes_the_nccl_of_every_torch_we_build(package, version):
    pins = dict(CURRENT_PINS, **{package: version})
    assert failed(evaluate_rules(role_rules('sglang-0.5.23-cu130'), pins, '13.0', '3.12.3')) == {}


@pytest.mark.parametrize('package, version', [
    ('nvidia-nccl-cu12', '2.26.2'),     # breaks TP>1 on Blackwell (NVIDIA/nccl#2418, sgl-project/sglang#7227)
    ('nvidia-nccl-cu12', '2.21.5'),     # before the SM120 shared memory fix (NVIDIA/nccl#1637)
    ('nvidia_nccl_cu13', '2.26.2'),     # a PEP 503 spelling of nvidia-nccl-cu13
    ('nvidia-nccl-cu12', '2.26.2.post1'),
])
def test_an_nccl_pinned_at_or_below_2_26_2_names_the_floor(package, version):
    pins = dict(FIELD_NOTES_PINS, **{package: version})
    problems = failed(evaluate_rules(role_rules('sglang-0.5.9-cu130'), pins, '13.0', '3.12.3'))
    name = normalize_name(package)
    assert problems == {'nccl-newer-than-2.26.2': '%s must be newer than 2.26.2; the pin set has %s %s'
                                                  % (name, name, version)}


def test_the_nccl_floor_reads_the_lock_that_torch_resolved_nccl_into():
    # The PyPI equivalent of the field-notes stack as uv locked it: torch 2.9.1 brings nvidia-nccl-cu12 2.27.5.
    with open(os.path.join(LOCKS, 'lock_field_notes_pypi.txt')) as handle:
        text = handle.read()
    rules = role_rules('sglang-0.5.9-cu130')
    assert lock_packages(text)['nvidia-nccl-cu12'] == ['2.27.5']
    assert [r['name'] for r in floor_results(rules, lock_packages(text), 'fn.txt')] == ['nccl-newer-than-2.26.2']
    assert failed(floor_results(rules, lock_packages(text), 'fn.txt')) == {}
    old = text.replace('nvidia-nccl-cu12==2.27.5', 'nvidia-nccl-cu12==2.26.2')
    assert failed(floor_results(rules, lock_packages(old), 'fn.txt')) == {
        'nccl-newer-than-2.26.2': 'nvidia-nccl-cu12 must be newer than 2.26.2; fn.txt has nvidia-nccl-cu12 2.26.2'}
    # A universal lock may hold a name once per marker: every one is judged.
    assert failed(floor_results(rules, {'nvidia-nccl-cu12': ['2.27.5', '2.26.2'], 'nvidia-nccl-cu13': ['2.18.1']},
                                'u.txt'))['nccl-newer-than-2.26.2'] == (
        'nvidia-nccl-cu12 and nvidia-nccl-cu13 must be newer than 2.26.2; u.txt has nvidia-nccl-cu12 2.26.2, '
        'nvidia-nccl-cu13 2.18.1')


@pytest.mark.parametrize('rule, words', [
    ({'name': 'r', 'kind': 'newer_than', 'packages': ['a']}, 'a newer_than rule needs packages, version; this one is missing version'),
    ({'name': 'r', 'kind': 'newer_than', 'version': '1.0'}, 'this one is missing packages'),
    ({'name': 'r', 'kind': 'newer_than', 'packages': ['a'], 'version': '1.*'},
     "the version of a newer_than rule is a release like 2.26.2; this one has '1.*'"),
    ({'name': 'r', 'kind': 'requires', 'package': 'sgl-kernel', 'version': '0.3.21'},
     'a requires rule needs package, needs; this one is missing needs'),
    ({'name': 'r', 'kind': 'requires', 'needs': {'package': 'torch', 'version': '2.9.*'}},
     'a requires rule needs package, needs; this one is missing package'),
    ({'name': 'r', 'kind': 'requires', 'package': 'sgl-kernel', 'needs': {'package': 'torch'}},
     'this one is missing needs.package and needs.version'),
    ({'name': 'r', 'kind': 'same_version'}, 'a same_version rule needs packages; this one is missing packages'),
    ({'name': 'r', 'kind': 'same_version', 'packages': ['a']}, 'needs at least two packages; this one has a'),
    ({'name': 'r', 'kind': 'python_version'}, 'a python_version rule needs versions; this one is missing versions'),
    ({'name': 'r', 'kind': 'python_version', 'versions': []}, 'this one is missing versions'),
    ({'name': 'r', 'kind': 'cuda_major'}, 'a cuda_major rule needs major; this one is missing major'),
    ({'name': 'r', 'kind': 'cuda_major', 'major': 'thirteen'}, "this one has 'thirteen'"),
])
def test_a_rule_without_the_fields_of_its_kind_fails_by_name(rule, words):
    # Before: requires without needs said "needs  *; the pin set has no ", same_version without
    # packages passed, python_version without versions said "(allowed: )".
    pins = {'sgl-kernel': '0.3.21', 'torch': '2.9.1', 'a': '1'}
    problems = failed(evaluate_rules([rule], pins, '13.0', '3.12.3'))
    assert list(problems) == ['r']
    assert words in problems['r']


def test_complete_rules_of_every_kind_pass():
    rules = [{'name': 'a', 'kind': 'same_version', 'packages': ['a', 'b']},
             {'name': 'b', 'kind': 'requires', 'package': 'a', 'needs': {'package': 'b', 'version': '1'}},
             {'name': 'c', 'kind': 'cuda_local_tag'},
             {'name': 'd', 'kind': 'cuda_major', 'major': '13'},
             {'name': 'e', 'kind': 'python_version', 'versions': ['3.12']},
             {'name': 'f', 'kind': 'newer_than', 'packages': ['a', 'c'], 'version': '0.9'}]
    assert failed(evaluate_rules(rules, {'a': '1', 'b': '1'}, '13.0', '3.12.3')) == {}


@pytest.mark.parametrize('value, ok', [('13.0', True), ('12.8.1', True), ('13', True), ('abc', False),
                                       ('13.0\n', False), ('', False), ('13.x', False)])
def test_cuda_version_problem(value, ok):
    problem = cuda_version_problem(value)
    assert (problem is None) is ok
    if not ok:
        assert problem.startswith('%s is not a CUDA version (allowed:' % json.dumps(value))
