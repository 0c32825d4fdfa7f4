# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make parser-proof`: the argument check against the real sglang of each supported release (issue 41).

The probe (arg_check.PROBE) runs as the module runs it, `python -I`, in a venv that imports the real
sglang.srt.server_args (torch and all); the same words go to the stand-in, whose parser the unit tests and the
scenarios ask. Both must agree, and agree with what each release is known to do with them."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_options import ROOT, releases, options, standin_env, standin_options  # noqa: E402  pylint: disable=wrong-import-position

sys.path.insert(0, os.path.join(ROOT, '.collections'))
from ansible_collections.inferops.gpu.plugins.module_utils.sglang import arg_check  # noqa: E402  pylint: disable=wrong-import-position

RELEASES = releases()
pytestmark = pytest.mark.skipif(not RELEASES, reason='SGLANG_PARSER_PYTHONS is not set: run make parser-proof')
# As the role renders the command line: the config file, the model, the address; then the case's words.
MODEL = ['--config', '/etc/sglang/sglang-server.yaml', '--model-path', '/srv/models/kimi', '--host', '127.0.0.1',
         '--port', '30000']
# (words, {release: the word refused, '' when the parser takes them})
CASES = [
    (['--tp', '8', '--cuda-graph-max-bs', '64'], {'0.5.9': '', '0.5.23': '--cuda-graph-max-bs'}),
    (['--tp', '8', '--cuda-graph-max-bs-decode', '64'], {'0.5.9': '--cuda-graph-max-bs-decode', '0.5.23': ''}),
    (['--tp', '8', '--pp', '2'], {'0.5.9': '--pp', '0.5.23': '--pp'}),
    (['--tp-sizee', '8'], {'0.5.9': '--tp-sizee', '0.5.23': '--tp-sizee'}),
    (['--tp', 'eight'], {'0.5.9': '--tp', '0.5.23': '--tp'}),
    (['--enable-torch-compil'], {'0.5.9': '--enable-torch-compil', '0.5.23': '--enable-torch-compil'}),
    (['--mem-fraction-stat', '0.8'], {'0.5.9': '', '0.5.23': ''}),
    # The form the role gives a key that starts with '-' (server_validate, the gateway's launcher).
    (['--api-key=-k3y'], {'0.5.9': '', '0.5.23': ''}),
    (['--tp-size', '4', '--pp-size', '2', '--dist-init-addr', '10.0.0.1:5000', '--nnodes', '2', '--node-rank', '1',
      '--enable-metrics', '--disable-custom-all-reduce', '--served-model-name', 'kimi'], {'0.5.9': '', '0.5.23': ''}),
    (['--enable-metrics', 'yes'], {'0.5.9': 'yes', '0.5.23': 'yes'}),
]


def probe(python, words, env=None):
    argv = arg_check.command(python, MODEL + words)
    if env is not None:  # the stand-in comes from PYTHONPATH, which -I would ignore
        argv.remove('-I')
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, check=False)
    return arg_check.answer(out.returncode, out.stdout, out.stderr)


def refused_word(found, words):
    """The word the check names, '' when it names none; the parser's error when it names no word of ours."""
    problems = arg_check.judge(found, {'sglang_server_args': words})
    if not problems:
        return ''
    for index, word in enumerate(words):
        if problems[0].startswith('sglang_server_args[%d] = "%s"' % (index, word)):
            return word.split('=', 1)[0]
    return found.get('error') or problems[0]


@pytest.mark.parametrize('version', sorted(RELEASES))
def test_the_stand_ins_parser_has_the_real_parsers_options(version):
    real = options(RELEASES[version])
    standin = standin_options(version)
    missing = sorted(set(real) - set(standin))
    extra = sorted(set(standin) - set(real))
    assert not missing and not extra, ('sglang %s: the stand-in lacks %s and has %s that the real parser does not '
                                       '(tools/sglang-parser-proof.sh --write-standin after a release moved)'
                                       % (version, missing, extra))


@pytest.mark.parametrize('version', sorted(RELEASES))
def test_the_real_release_and_the_stand_in_judge_every_case_alike(version):
    python = RELEASES[version]
    with ThreadPoolExecutor(max_workers=2) as pool:
        real = list(pool.map(lambda case: probe(python, case[0]), CASES))
    for (words, expected), found in zip(CASES, real):
        assert found['parser'] and arg_check.other_release(found, version) is False, found
        standin = probe(sys.executable, words, standin_env(version))
        assert (refused_word(found, words), refused_word(standin, words)) == (expected[version],) * 2, (
            'sglang %s, %s: the real parser says %r, the stand-in %r' % (version, words, found, standin))
