# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang's own parser judges the server's arguments before anything stops (issue 41).

A typo in the arguments (an unknown option, `--pp` which the parser finds ambiguous, an option the
release's SGLang does not have) used to pass every check, and the new start failed only after the
serving server was stopped. ``PROBE`` runs in the release's interpreter: it builds the parser as
``prepare_server_args`` does (``argparse.ArgumentParser`` + ``ServerArgs.add_cli_args``, the same in
0.5.9 and 0.5.23: ``make contract`` holds it against the wheels) and parses the command line the
unit would run, without creating ``ServerArgs`` (whose post-init reads the model and the GPUs) and
without launching anything. ``judge`` turns its answer into the input checks' one line per bad word,
naming the variable and the word.
"""

from __future__ import annotations

import json
import re

MARKER = 'INFEROPS-SGLANG-ARGS '
# Runs as `python -I -c PROBE <args...>`: the answer is the last line that starts with MARKER (an import may
# print, --help would print the usage).
PROBE = r'''
import argparse, json, sys
answer = {"version": "", "parser": False, "why": "", "error": ""}
try:
    from sglang.srt.server_args import ServerArgs
except BaseException as exc:
    answer["why"] = "sglang.srt.server_args does not import: %s: %s" % (type(exc).__name__, exc)
else:
    class Refused(Exception):
        pass

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise Refused(message)

        def exit(self, status=0, message=None):
            raise Refused((message or "").strip() or "it exits %s" % status)

    import sglang
    answer["version"] = str(getattr(sglang, "__version__", ""))
    parser = Parser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    answer["parser"] = True
    try:
        parser.parse_args(sys.argv[1:])
    except Refused as exc:
        answer["error"] = str(exc)
print("%s%s" % (MARKER, json.dumps(answer)))
'''.replace('MARKER', repr(MARKER))
UNRECOGNIZED = 'unrecognized arguments: '
OPTION = re.compile(r'(?<![\w-])(--?[A-Za-z][\w-]*)')


def command(python, argv):
    return [python, '-I', '-c', PROBE] + [str(arg) for arg in argv]


def answer(rc, out, err):
    """The probe's answer ({version, parser, why, error}); a probe that printed none says why."""
    for line in reversed((out or '').splitlines()):
        if line.startswith(MARKER):
            try:
                return json.loads(line[len(MARKER):])
            except ValueError:
                break
    tail = ' '.join((err or out or '').strip().splitlines()[-3:])[:400]
    return {'version': '', 'parser': False, 'why': 'the probe printed no answer (rc %s): %s' % (rc, tail), 'error': ''}


def _release_version(version):
    return str(version or '').split('+', maxsplit=1)[0]


def other_release(found, expected_version):
    """Whether the release holds another sglang than `expected_version` (neither empty)."""
    wanted, have = _release_version(expected_version), _release_version(found.get('version'))
    return bool(wanted and have and wanted != have)


def judge(found, sources, expected_version=''):
    """Problems, one line each: the word of `sources` ({variable: [words]}) the parser refused, the parser's own
    words and the release. `expected_version`: the sglang the role renders the arguments for; a release holding
    another one is named too. Nothing when the release has no parser to ask (found['parser'] false)."""
    if not found.get('parser'):
        return []
    release = 'sglang %s' % (_release_version(found.get('version')) or '(version unknown)')
    problems = []
    error = found.get('error') or ''
    if error:
        culprit = None
        # The parser names the word as given (unknown, ambiguous) or the option's full names (a bad value of
        # `--tp`, an abbreviation of --tp-size): a word that is one of them or abbreviates one.
        for option in OPTION.findall(error):
            for variable, words in sorted(sources.items()):
                for index, word in enumerate(words or []):
                    given = str(word).split('=', 1)[0]
                    if given.startswith('--') and len(given) > 2 and option.startswith(given):
                        culprit = culprit or (variable, index, str(word))
        # A stray value (`--enable-metrics yes`: the flag takes none) is named as argparse gives it.
        stray = error.split(UNRECOGNIZED, 1)[1].split() if error.startswith(UNRECOGNIZED) else []
        for variable, words in sorted(sources.items()):
            for index, word in enumerate(words or []):
                if stray and str(word) == stray[0]:
                    culprit = culprit or (variable, index, str(word))
        if culprit:
            variable, index, word = culprit
            problems.append('%s[%d] = %s is not allowed: an argument the release\'s %s takes (its parser says: %s)'
                            % (variable, index, json.dumps(word), release, error))
        else:
            problems.append('the server\'s arguments (%s) are not allowed: the release\'s %s parser says: %s'
                            % (', '.join(sorted(sources)), release, error))
    if other_release(found, expected_version):
        have = _release_version(found.get('version'))
        problems.append('sglang_server_sglang_version = %s is not allowed: the version the release holds (%s): '
                        'the arguments are rendered and checked for it' % (json.dumps(str(expected_version)), have))
    return problems
