# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The server's arguments judged by SGLang's own parser (issue 41): the probe run for real in an interpreter that
imports the stand-in's sglang.srt.server_args (the real wheels' ServerArgs.add_cli_args is held by make contract)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.sglang import arg_check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
STANDIN = os.path.join(ROOT, 'tests', 'fixtures', 'sglang_standin')
MODEL = ['--config', '/etc/sglang/sglang-server.yaml', '--model-path', '/srv/models/kimi', '--host', '127.0.0.1',
         '--port', '30000']


def probe(args, version='0.5.9', importable=True):
    """The probe's answer, run as the module runs it but without -I (the stand-in comes from PYTHONPATH here)."""
    argv = arg_check.command(sys.executable, MODEL + list(args))
    argv.remove('-I')
    env = dict(os.environ, SGLANG_STANDIN_VERSION=version, PYTHONPATH=STANDIN if importable else '')
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=False)
    return arg_check.answer(out.returncode, out.stdout, out.stderr)


@pytest.mark.parametrize('args, refused, said', [
    # The three: ambiguous to SGLang's parser, unknown, and an option the release lacks.
    (['--tp', '8', '--pp', '2'], '"--pp"', 'ambiguous option: --pp could match'),
    (['--tp-sizee', '8'], '"--tp-sizee"', 'unrecognized arguments: --tp-sizee 8'),
    (['--cuda-graph-max-bs-decode', '64'], '"--cuda-graph-max-bs-decode"', 'unrecognized arguments'),
    (['--tp', 'eight'], '"--tp"', "invalid int value: 'eight'"),
    # As the real parser has it (its whole option set is the stand-in's: make parser-proof).
    (['--enable-torch-compil'], '"--enable-torch-compil"', 'could match --enable-torch-compile, '),
    # A value after a flag that takes none: argparse names the word, not an option.
    (['--enable-metrics', 'yes'], '"yes"', 'unrecognized arguments: yes'),
])
def test_the_parser_refuses_the_word_and_the_message_names_the_variable(args, refused, said):
    found = probe(args)
    assert found['parser'] is True and found['version'] and said in found['error'], found
    problems = arg_check.judge(found, {'sglang_server_args': args, 'sglang_server_extra_args': []}, '0.5.9')
    assert len(problems) == 1, problems
    assert problems[0].startswith('sglang_server_args[') and ('= %s is not allowed' % refused) in problems[0]
    assert "the release's sglang" in problems[0] and said in problems[0]


def test_what_the_release_takes_passes_and_the_release_decides():
    assert arg_check.judge(probe(['--tp', '8', '--cuda-graph-max-bs', '64']), {'sglang_server_args': []}) == []
    # 0.5.23 replaced --cuda-graph-max-bs with per-phase options: the same words are refused there, the new ones taken.
    newer = probe(['--cuda-graph-max-bs', '64'], version='0.5.23')
    assert 'ambiguous option: --cuda-graph-max-bs' in newer['error'], newer
    assert arg_check.judge(probe(['--cuda-graph-max-bs-decode', '64'], version='0.5.23'), {}) == []


def test_the_extra_args_are_named_as_theirs():
    # An abbreviation SGLang's parser takes (allow_abbrev) passes: the parser, not a list of ours, decides.
    assert probe(['--mem-fraction-stat', '0.8'])['error'] == ''
    found = probe(['--tp', '1', '--enable-torch-compilation'])
    problems = arg_check.judge(found, {'sglang_server_args': ['--tp', '1'],
                                       'sglang_server_extra_args': ['--enable-torch-compilation']})
    assert problems and problems[0].startswith(
        'sglang_server_extra_args[0] = "--enable-torch-compilation" is not allowed'), problems


def test_a_release_without_a_parser_is_not_judged_and_says_why():
    found = probe(['--tp', '8'], importable=False)
    assert found['parser'] is False and 'sglang.srt.server_args does not import' in found['why'], found
    assert arg_check.judge(found, {'sglang_server_args': ['--tp', '8']}) == []


def test_a_release_of_another_version_than_the_role_renders_for_is_refused():
    found = {'parser': True, 'version': '0.5.9', 'error': ''}
    problems = arg_check.judge(found, {}, '0.5.21')
    assert problems == ['sglang_server_sglang_version = "0.5.21" is not allowed: the version the release holds '
                        '(0.5.9): the arguments are rendered and checked for it']
    assert arg_check.judge(dict(found, version='0.5.9+cu130'), {}, '0.5.9') == []


def test_an_answer_that_never_came_says_what_the_probe_printed():
    found = arg_check.answer(1, '', 'Traceback (most recent call last):\nImportError: libcuda.so.1\n')
    assert found['parser'] is False and 'rc 1' in found['why'] and 'libcuda.so.1' in found['why']
    # --help prints the usage, and the answer is still the marker's line.
    assert probe(['--help'])['error'], probe(['--help'])
