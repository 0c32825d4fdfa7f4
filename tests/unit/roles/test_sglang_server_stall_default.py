# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stall limit's default follows a shorter whole start (issue 41).

check_stall_timeout refuses a stall limit above sglang_server_timeout (it would never fire), so a
fixed default of 600 refused `sglang_server_timeout: 30` alone over a variable the operator never set.
The default is min(600, sglang_server_timeout), rendered here as the role renders it (every role's
defaults and vars over the facts of a real Debian host, tests/unit/plugins/lookup/input_cases.py),
then judged by the role's argument spec and checks.
"""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'unit', 'plugins', 'lookup'))
import input_cases  # noqa: E402  pylint: disable=wrong-import-position


def evaluated(**case_vars):
    return input_cases.Evaluation({'role': 'sglang_server', 'vars': dict(input_cases.REQUIRED, **case_vars)})


@pytest.mark.parametrize('timeout, stall', [(3000, 600), (600, 600), (601, 600), (30, 30), ('30', 30), (1, 1)])
def test_the_stall_default_is_the_shorter_of_600_and_the_whole_start(timeout, stall):
    evaluation = evaluated(sglang_server_timeout=timeout)
    assert int(evaluation.values['sglang_server_stall_timeout']) == stall
    assert evaluation.messages() == ''


@pytest.mark.parametrize('timeout', [0, '-5', 'abc', 'thirty'])
def test_a_bad_timeout_is_named_once_and_the_stall_default_stays_600(timeout):
    # The stall's default must not turn a bad sglang_server_timeout into a second message about a
    # variable the operator never set.
    evaluation = evaluated(sglang_server_timeout=timeout)
    assert int(evaluation.values['sglang_server_stall_timeout']) == 600
    text = evaluation.messages()
    assert 'sglang_server_timeout' in text and 'sglang_server_stall_timeout' not in text, text


@pytest.mark.parametrize('timeout, stall', [(30, 600), (30, 31), ('900', '1200')])
def test_a_stall_limit_set_above_the_whole_start_is_still_refused(timeout, stall):
    text = evaluated(sglang_server_timeout=timeout, sglang_server_stall_timeout=stall).messages()
    assert text.startswith('sglang_server_stall_timeout = ') and 'at most sglang_server_timeout' in text, text


def test_a_stall_limit_set_within_a_short_whole_start_passes():
    assert evaluated(sglang_server_timeout=30, sglang_server_stall_timeout=10).messages() == ''
