# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Taking over a host set up by hand (issue 42, inferops_adopt): what host_scan.py found, undone with a backup.

``plan`` decides, from the scan alone and before anything is written, what to do with each file:
- a Python start-up file (the distro's sitecustomize.py the by-hand upgrade appended to, a usercustomize.py, a
  .pth) keeps every line but the statements that write a variable the spec sets (or one it computes): each of
  those becomes ``pass  # inferops.gpu adopted: <the line>``, so a block around it stays valid and the distro's
  own lines (its apport hook) run as before. A statement that shares its line with another, or that is the
  header of a block, cannot be cut out alone: the plan refuses it, naming the file and line, and nothing is done;
- /etc/environment and a /etc/profile.d script lose the lines that set a variable of the spec (PATH excepted: that
  line is the distro's);
- a /etc/ld.so.conf.d file from which the loader resolves the CUDA runtime or NCCL instead of the collection's is
  moved aside whole.
``apply`` copies every file into the backup directory first (``<backup_dir>/<stamp>/<its absolute path>``), then
writes each new text in one rename (a symlink, such as Debian's sitecustomize.py, stays a link: its target is
written), moves the loader files, and writes ``adoption.json`` (what was done) and ``undo.sh`` (the copies back).
"""

from __future__ import annotations

import ast
import json
import os
import shutil

from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import replace_text
from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import hand_edits

MARK = 'inferops.gpu adopted'
_COMPOUND = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef,
             ast.AsyncFor, ast.AsyncWith) + ((ast.Match,) if hasattr(ast, 'Match') else ()) + (
                 (ast.TryStar,) if hasattr(ast, 'TryStar') else ())


class Refused(Exception):
    """A finding adoption cannot undo by itself: the message names the file and line and what to do."""


def _targets(name, managed):
    return name == '?' or name in managed


def _statement(node, parents):
    while not isinstance(node, ast.stmt):
        node = parents[node]
    return node


def _sharing(statement, tree):
    """Whether another statement starts or ends on one of the statement's lines (a `;` on the same line)."""
    lines = range(statement.lineno, statement.end_lineno + 1)
    for other in ast.walk(tree):
        if isinstance(other, ast.stmt) and other is not statement and not _contains(other, statement) \
                and not _contains(statement, other) and (other.lineno in lines or other.end_lineno in lines):
            return True
    return False


def _contains(outer, inner):
    return outer.lineno <= inner.lineno and inner.end_lineno <= outer.end_lineno and outer is not inner and any(
        node is inner for node in ast.walk(outer))


def neutralise_python(path, text, managed):
    """(new text, [{line, name, text}]) with each statement that writes a name of managed (or a computed one) turned
    into `pass` and a comment; Refused for a write that cannot be cut out alone."""
    if path.endswith('.pth'):
        return _neutralise_pth(path, text, managed)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        raise Refused('%s cannot be read as Python (%s): fix it by hand' % (path, exc.__class__.__name__))
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    lines = text.splitlines(True)
    statements = {}
    for node, name, how in hand_edits.write_nodes(tree):
        if not _targets(name, managed):
            continue
        statement = _statement(node, parents)
        if isinstance(statement, _COMPOUND) or _sharing(statement, tree):
            raise Refused('%s line %s %s %s in a statement that holds more than that write: take it out by hand '
                          '(keep a copy), then run again' % (path, node.lineno, how, name))
        statements.setdefault(statement.lineno, (statement, []))[1].append(name)
    changes = []
    for first in sorted(statements, reverse=True):
        statement, names = statements[first]
        original = lines[first - 1:statement.end_lineno]
        indent = original[0][:len(original[0]) - len(original[0].lstrip())]
        replaced = ['%spass  # %s: %s\n' % (indent, MARK, original[0].strip())]
        replaced += ['# %s: %s\n' % (MARK, line.rstrip('\n')) for line in original[1:]]
        lines[first - 1:statement.end_lineno] = replaced
        changes.append({'line': first, 'names': sorted(set(names)), 'text': ''.join(original).rstrip('\n')})
    new = ''.join(lines)
    ast.parse(new)  # never write a file Python cannot read: a bug here must fail, not break every interpreter
    return new, sorted(changes, key=lambda change: change['line'])


def _neutralise_pth(path, text, managed):
    """site.py runs a .pth line only when it starts with `import`: a commented line is skipped."""
    found = {}
    for finding in hand_edits.python_edits(path, text):
        if _targets(finding['name'], managed):
            found.setdefault(finding['line'], []).append(finding['name'])
    lines = text.splitlines(True)
    changes = []
    for number in sorted(found):
        original = lines[number - 1].rstrip('\n')
        lines[number - 1] = '# %s: %s\n' % (MARK, original)
        changes.append({'line': number, 'names': sorted(set(found[number])), 'text': original})
    return ''.join(lines), changes


def neutralise_login(path, text, managed):
    """/etc/environment (pam_env reads `#` as a comment) or a profile.d script (`:` keeps an if block valid)."""
    names = set(managed) - {'PATH'}
    lines = text.splitlines(True)
    changes = []
    for finding in hand_edits.shell_edits(path, text):
        if finding['name'] in names:
            original = lines[finding['line'] - 1].rstrip('\n')
            lead = '' if path.endswith('/environment') else ': '
            lines[finding['line'] - 1] = '%s# %s: %s\n' % (lead, MARK, original)
            changes.append({'line': finding['line'], 'names': [finding['name']], 'text': original})
    return ''.join(lines), changes


def plan(found, owned_roots, sonames):
    """{edits: [{path, text (new), changes}], moves: [{path, taken}]} from host_scan.scan's result; Refused first."""
    managed = found['managed']
    edits, refusals = [], []
    files = [(path, text, neutralise_python) for path, text in sorted(found['texts']['python'].items())]
    files += [(path, text, neutralise_login) for path, text in sorted(found['texts']['login'].items())]
    for path, text, neutralise in files:
        try:
            new, changes = neutralise(path, text, managed)
        except Refused as exc:
            refusals.append(str(exc))
            continue
        if changes:
            edits.append({'path': path, 'text': new, 'before': text, 'changes': changes})
    if refusals:
        raise Refused('; '.join(refusals))
    moves = {}
    for entry, taken in hand_edits.loader_verdicts(found['loader'], found['resolved'], owned_roots, sonames):
        if taken:
            moves.setdefault(entry['file'], set()).update(taken)
    return {'edits': edits, 'moves': [{'path': path, 'taken': sorted(taken)} for path, taken in sorted(moves.items())]}


def backup_path(root, path):
    return os.path.join(root, path.lstrip('/'))


def apply(actions, backup_root, when, realpath=os.path.realpath):
    """Back up, then do what plan said; returns the record written to <backup_root>/adoption.json."""
    os.makedirs(backup_root, 0o700)
    record = {'when': when, 'backup': backup_root, 'edited': [], 'moved': []}
    for edit in actions['edits']:
        target = realpath(edit['path'])
        copy = backup_path(backup_root, edit['path'])
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        shutil.copy2(target, copy)
        record['edited'].append({'path': edit['path'], 'file': target, 'backup': copy, 'changes': edit['changes']})
    for move in actions['moves']:
        copy = backup_path(backup_root, move['path'])
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        shutil.copy2(move['path'], copy)
        record['moved'].append({'path': move['path'], 'backup': copy, 'taken': move['taken']})
    _write_record(backup_root, record)
    # Only now, every copy made: the edits, each in one rename, keeping the file's mode and owner.
    for edit, done in zip(actions['edits'], record['edited']):
        status = os.stat(done['file'])
        replace_text(done['file'], edit['text'], status.st_mode & 0o7777, status.st_uid, status.st_gid)
    for move in actions['moves']:
        os.unlink(move['path'])
    return record


def _write_record(backup_root, record):
    with open(os.path.join(backup_root, 'adoption.json'), 'w') as handle:
        json.dump(record, handle, indent=2, sort_keys=True)
        handle.write('\n')
    undo = ['#!/bin/sh', '# Undo the adoption of %s: put back what it changed, as it was.' % record['when'], 'set -e']
    for item in record['edited']:
        undo.append("cp -p '%s' '%s'" % (item['backup'], item['file']))
    for item in record['moved']:
        undo.append("cp -p '%s' '%s'" % (item['backup'], item['path']))
    if record['moved']:
        undo.append('ldconfig')
    with open(os.path.join(backup_root, 'undo.sh'), 'w') as handle:
        handle.write('\n'.join(undo) + '\n')
    os.chmod(os.path.join(backup_root, 'undo.sh'), 0o700)
