# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lock filters over locks uv wrote (tests/unit/fixtures/locks): the CI stack's universal lock
and the PyPI equivalent of the field-notes stack (169 distributions, the real size)."""

from __future__ import annotations

import os
import time

from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.lock import lock_packages, lock_problems, normal_name

LOCKS = os.path.join(os.path.dirname(__file__), '..', '..', 'fixtures', 'locks')
CI_PINS = {'packaging': '24.1', 'six': '1.17.0', 'idna': '3.10', 'markupsafe': '3.0.2'}
FIELD_NOTES_PINS = {'torch': '2.9.1', 'sgl-kernel': '0.3.21', 'flashinfer-python': '0.6.4',
                    'flashinfer-cubin': '0.6.4', 'sglang': '0.5.9'}


def read(name):
    with open(os.path.join(LOCKS, name)) as handle:
        return handle.read()


def test_a_lock_uv_wrote_for_the_pins_has_no_problem():
    assert lock_problems(read('lock_universal.txt'), CI_PINS, 'ci.txt') == []
    assert lock_packages(read('lock_universal.txt')) == {'idna': ['3.10'], 'markupsafe': ['3.0.2'],
                                                         'packaging': ['24.1'], 'six': ['1.17.0']}


def test_the_field_notes_equivalent_keeps_every_pin_at_the_real_size():
    text = read('lock_field_notes_pypi.txt')
    started = time.monotonic()
    assert lock_problems(text, FIELD_NOTES_PINS) == []
    assert time.monotonic() - started < 1.0
    assert len(lock_packages(text)) > 150


def test_a_pin_the_lock_does_not_hold_names_both():
    problems = lock_problems(read('lock_universal.txt'), dict(CI_PINS, packaging='24.2', requests='2.32.3'), 'ci.txt')
    assert problems == [
        'the profile pins packaging 24.2; ci.txt has packaging==24.1: make the lock again from these pins',
        'the profile pins requests 2.32.3; ci.txt has no requests: make the lock again from these pins']


def test_names_and_versions_compare_as_packaging_does():
    text = 'FlashInfer_Python==0.6.4 \\\n    --hash=sha256:%s\n' % ('a' * 64)
    assert lock_problems(text, {'flashinfer-python': '0.6.4.0'}) == []
    assert normal_name('FlashInfer_Python') == normal_name('flashinfer.python') == 'flashinfer-python'


def test_a_requirement_without_a_hash_or_not_exact_is_refused():
    text = ('# header\n--index-url https://pypi.org/simple\nsix==1.17.0\n'
            'idna>=3 \\\n    --hash=sha256:%s\ngit+https://example.org/x.git\n' % ('b' * 64))
    assert lock_problems(text, {}, 'x.txt') == [
        'x.txt line 3: six==1.17.0 has no --hash (make the lock with hashes: make lock, or uv pip compile --generate-hashes)',
        "x.txt line 4: 'idna>=3' is not name==version (a lock pins every distribution exactly)",
        "x.txt line 6: 'git+https://example.org/x.git' is not name==version (a lock pins every distribution exactly)"]


def test_markers_and_one_name_per_marker():
    text = ('numpy==1.26.4 ; python_full_version < \'3.10\' \\\n    --hash=sha256:%s\n'
            'numpy==2.2.6 ; python_full_version >= \'3.10\' \\\n    --hash=sha256:%s\n') % ('c' * 64, 'd' * 64)
    assert lock_packages(text) == {'numpy': ['1.26.4', '2.2.6']}
    assert lock_problems(text, {'numpy': '2.2.6'}) == [
        'the profile pins numpy 2.2.6; the lock has numpy==1.26.4: make the lock again from these pins']


def test_an_empty_lock_is_refused():
    assert lock_problems('# nothing\n', {}, 'empty.txt') == ['empty.txt holds no requirement']
    assert lock_problems('', {'six': '1.17.0'})[0] == 'the lock holds no requirement'
