# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stand-in's `slow` fault: a server that starts and answers like a clean one, only slower per token."""

from __future__ import annotations

import json
import time

from sglang.standin import faults
from sglang.standin.settings import Settings

READY = 'The server is fired up and ready to roll!'
TOKENS = 20
SLOW = {'SGLANG_STANDIN_TOKEN_SECONDS': '0.01'}


def timed_generate(server):
    tic = time.monotonic()
    status, body = server.request('POST', '/generate', {
        'text': 'Hello', 'sampling_params': {'max_new_tokens': TOKENS, 'temperature': 0, 'ignore_eos': True}})
    return status, json.loads(body), time.monotonic() - tic


def test_slow_is_a_known_fault_and_its_factor_is_read():
    assert faults.read_fault({'SGLANG_STANDIN_FAULT': 'slow'}) == 'slow'
    assert 'slow' in faults.RANK_FAULTS
    assert Settings({}).slow_factor == 5.0
    assert Settings({'SGLANG_STANDIN_SLOW_FACTOR': '3'}).slow_factor == 3.0
    assert Settings({'SGLANG_STANDIN_SLOW_FACTOR': '0.5'}).slow_factor == 1.0  # never faster
    assert Settings({'SGLANG_STANDIN_SLOW_FACTOR': 'x'}).slow_factor == 5.0


def test_slow_keeps_health_and_answers_but_each_token_takes_longer(standin):
    clean = standin(['--tp', '2'], env=SLOW)
    slow = standin(['--tp', '2'], env=dict(SLOW, SGLANG_STANDIN_FAULT='slow', SGLANG_STANDIN_SLOW_FACTOR='4'))
    clean.wait_for(READY)
    slow.wait_for(READY)
    assert slow.request('GET', '/health_generate')[0] == 200
    assert slow.request('GET', '/health')[0] == 200

    status, body, clean_took = timed_generate(clean)
    assert status == 200 and body['meta_info']['completion_tokens'] == TOKENS
    status, body, slow_took = timed_generate(slow)
    assert status == 200 and body['meta_info']['completion_tokens'] == TOKENS
    again = timed_generate(clean)
    assert body['text'] == again[1]['text']  # the same answer, only later
    # 20 tokens of 0.01 s: about 0.2 s clean, 0.8 s at factor 4. A busy machine adds the same time to both
    # (a clean answer took 0.4 s beside the other lanes of make test): the factor shows in the difference,
    # 0.6 s, against the quicker of two clean answers.
    clean_took = min(clean_took, again[2])
    assert slow_took >= 0.75, slow_took
    assert slow_took - clean_took >= 0.45, (slow_took, clean_took)
    assert 'Scheduler hit an exception' not in slow.log()

    status, took = slow.terminate()
    assert status == -9  # sglang 0.5.9's drain ends with SIGKILL to itself
    slow.assert_gone()
