# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_args end to end: a real venv whose site-packages finds the stand-in's sglang (as a release's would the
real one), its interpreter run as the module runs it (-I, under timeout(1))."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

from ansible_collections.inferops.gpu.plugins.modules import sglang_args
from module_harness import assert_options_match_spec, invoke, patch_exits, record_argument_spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
STANDIN = os.path.join(ROOT, 'tests', 'fixtures', 'sglang_standin')


@pytest.fixture(autouse=True)
def exits(monkeypatch):
    patch_exits(monkeypatch)


def run(args):
    result = invoke(sglang_args, args)
    return bool(result.get('failed')), result


@pytest.fixture(scope='module')
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp('release')
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(root)], check=True, timeout=120)
    site = glob.glob(str(root / 'lib' / 'python*' / 'site-packages'))[0]
    with open(os.path.join(site, 'standin.pth'), 'w') as handle:
        handle.write(STANDIN + '\n')
    return str(root / 'bin' / 'python')


def test_a_typo_is_refused_naming_the_variable_and_the_word(release):
    args = ['--tp', '8', '--pp', '2']
    failed, result = run({'python': release, 'argv': ['--model-path', '/m'] + args,
                          'sources': {'sglang_server_args': args}, 'version': '0.5.9'})
    assert failed and result['parser'] is True and result['version'] == '0.5.9'
    assert result['msg'].startswith('sglang_server_args[2] = "--pp" is not allowed: an argument the release\'s '
                                    'sglang 0.5.9 takes (its parser says: ambiguous option: --pp could match')


def test_good_arguments_pass_and_another_version_is_refused(release):
    argv = ['--model-path', '/m', '--tp', '8', '--cuda-graph-max-bs', '64']
    failed, result = run({'python': release, 'argv': argv, 'version': '0.5.9'})
    assert not failed and result['msg'] == 'sglang 0.5.9 takes the arguments' and result['error'] == ''
    failed, result = run({'python': release, 'argv': argv, 'version': '0.5.21'})
    assert failed and 'sglang_server_sglang_version = "0.5.21" is not allowed' in result['msg']


def test_no_release_or_no_sglang_in_it_is_skipped_with_the_reason(tmp_path):
    failed, result = run({'python': str(tmp_path / 'bin' / 'python'), 'argv': ['--tp', '8']})
    assert not failed and result['skipped'] and 'not built yet' in result['why']
    failed, result = run({'python': sys.executable, 'argv': ['--tp', '8']})
    assert not failed and result['skipped'] and 'sglang.srt.server_args does not import' in result['why']


def test_a_hung_interpreter_is_killed_at_the_limit_and_named(tmp_path):
    hung = tmp_path / 'python'
    hung.write_text('#!/bin/sh\nexec sleep 30\n')
    hung.chmod(0o755)
    failed, result = run({'python': str(hung), 'argv': ['--tp', '8'], 'command_timeout': 1})
    assert failed and '1 s' in result['msg'] and 'command_timeout' in result['msg'], result['msg']


def test_the_probe_runs_with_the_servers_environment(release):
    """The stand-in plays the release its environment names, as the unit's environment makes it: the parser and the
    version are that release's."""
    argv = ['--model-path', '/m', '--cuda-graph-max-bs-decode', '64']
    failed, result = run({'python': release, 'argv': argv, 'version': '0.5.23',
                          'environment': {'SGLANG_STANDIN_VERSION': '0.5.23'}})
    assert not failed and result['version'] == '0.5.23', result
    failed, result = run({'python': release, 'argv': argv, 'version': '0.5.9'})
    assert failed and 'unrecognized arguments: --cuda-graph-max-bs-decode 64' in result['msg']


def test_the_check_play_skips_a_release_of_another_sglang(release):
    """Before a profile change that brings another sglang, the release there now would judge another release's
    options: the check play skips it (other_version: skip) and the start judges them in the new release."""
    argv = ['--model-path', '/m', '--cuda-graph-max-bs-decode', '64']
    failed, result = run({'python': release, 'argv': argv, 'version': '0.5.23', 'other_version': 'skip'})
    assert not failed and result['skipped'] and 'the release holds sglang 0.5.9, the run serves 0.5.23' in result['why']
    # The same release and sglang: judged.
    failed, result = run({'python': release, 'argv': argv, 'version': '0.5.9', 'other_version': 'skip'})
    assert failed and 'unrecognized arguments: --cuda-graph-max-bs-decode 64' in result['msg']


def test_the_environment_is_no_secret_so_no_value_of_it_is_masked_in_the_message(monkeypatch, release):
    """A no_log option masks each of its values wherever it appears: with {...: "1"} the parser's message read
    `--tp-sizee ********` (issue 41's rolling scenario). The role leaves the secrets out instead."""
    seen = record_argument_spec(monkeypatch, sglang_args)
    failed, result = run({'python': release, 'argv': ['--model-path', '/m', '--tp-sizee', '1'],
                          'environment': {'SGLANG_STANDIN_DRAIN_POLL_SECONDS': '1'}})
    assert failed and 'unrecognized arguments: --tp-sizee 1' in result['msg'], result['msg']
    assert not seen['argument_spec']['environment'].get('no_log')
    assert_options_match_spec(sglang_args, seen)
