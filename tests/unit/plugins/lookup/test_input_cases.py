# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every case of tests/bad_inputs/ through the argument spec and the Python layer (input_cases.py),
and every check of the Python layer proven necessary: without it, some case of its table fails.

Cases marked `on_host: true` need what only a host shows (a path's stat, an interpreter): they
carry the probes' recorded results here, and the bad_input scenario runs them on a real host too,
with one case per role through site.yml.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import input_cases  # noqa: E402  pylint: disable=wrong-import-position

CASES = input_cases.load_cases()
HERE = CASES
_EVALUATED = {}


def evaluated(case):
    if case['id'] not in _EVALUATED:
        _EVALUATED[case['id']] = input_cases.Evaluation(case)
    return _EVALUATED[case['id']]


def test_every_role_has_a_table_and_unique_names():
    assert sorted(os.path.basename(t)[:-4] for t in input_cases.TABLES) == sorted(input_cases.ROLES)
    ids = [case['id'] for case in CASES]
    assert len(ids) == len(set(ids)), sorted(set(i for i in ids if ids.count(i) > 1))
    assert all(case.get('clean') or case.get('expect') for case in CASES)


@pytest.mark.parametrize('case', HERE, ids=[case['id'] for case in HERE])
def test_case(case):
    problem = input_cases.verdict(case, evaluated(case).messages())
    assert problem is None, problem


@pytest.mark.parametrize('role', input_cases.ROLES)
def test_every_check_is_needed(role):
    """Drop any one check from the role's CHECKS: some case of the role's table must then fail."""
    checks = input_cases.input_problems.ROLES[role].CHECKS
    cases = [case for case in HERE if case['role'] == role]
    unproven = []
    for index, dropped in enumerate(checks):
        rest = checks[:index] + checks[index + 1:]
        if all(input_cases.verdict(case, evaluated(case).messages(rest)) is None for case in cases):
            unproven.append(dropped.__name__)
    assert not unproven, 'no case of tests/bad_inputs/%s.yml fails without %s' % (role, ', '.join(unproven))
