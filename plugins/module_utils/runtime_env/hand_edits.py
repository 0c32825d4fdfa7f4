# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The environment a host was given by hand, found without running any of it (issue 42).

The by-hand upgrade set CUDA_HOME, TRITON_PTXAS_PATH and the NCCL variables in the distro's
``sitecustomize.py``; others use ``usercustomize.py``, a ``.pth`` line, ``/etc/environment`` or a
``/etc/profile.d`` script, and register another CUDA's or NCCL's libraries in ``/etc/ld.so.conf.d``.
Read statically (Python through ``ast``, never imported), each write is a finding with its file and
line. ``judge`` refuses what would make the collection's result wrong: a Python start-up file that
assigns (or removes) a variable the spec sets runs after the start-up hook in every interpreter of
the host, so the server would see its value; an ld.so.conf.d entry that makes the loader resolve
the CUDA runtime or NCCL from another directory. The rest (a setdefault, which loses to the hook;
login shells' files, which no unit reads; variables the spec does not set) are warnings.
"""

from __future__ import annotations

import ast
import os
import re

WRITE, REMOVE, DEFAULT = 'assigns', 'removes', 'sets a default for'
_ENVIRON = ('os.environ', 'environ')
_SHELL = re.compile(r'^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=')
_PAM = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s+(?:DEFAULT|OVERRIDE)=')


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return inner + '.' + node.attr if inner else ''
    return ''


def _key(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else '?'


def _writes(tree):
    """[(line, name, how)] of the writes to the process environment in a parsed module."""
    return sorted((node.lineno, name, how) for node, name, how in write_nodes(tree))


def write_nodes(tree):
    """[(node, name, how)] of the writes to the process environment in a parsed module: the node is the assignment,
    deletion or call that writes (adoption.py neutralises the statement around it)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and _dotted(target.value) in _ENVIRON:
                    found.append((node, _key(target.slice), REMOVE if isinstance(node, ast.Delete) else WRITE))
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            head, method = name.rpartition('.')[::2]
            first = node.args[0] if node.args else None
            if head in _ENVIRON and method in ('setdefault', '__setitem__', 'pop', '__delitem__'):
                how = DEFAULT if method == 'setdefault' else WRITE if method == '__setitem__' else REMOVE
                found.append((node, _key(first), how))
            elif head in _ENVIRON and method == 'update':
                names = [_key(key) for key in first.keys] if isinstance(first, ast.Dict) else (['?'] if first else [])
                found.extend((node, key, WRITE) for key in names + [kw.arg or '?' for kw in node.keywords])
            elif name in ('os.putenv', 'putenv', 'os.unsetenv', 'unsetenv'):
                found.append((node, _key(first), REMOVE if name.endswith('unsetenv') else WRITE))
    return found


def python_edits(path, text):
    """Findings of a Python start-up file: a module (sitecustomize, usercustomize) or a .pth file, of which site.py
    executes only the lines that start with `import`."""
    if path.endswith('.pth'):
        chunks = [(number, line) for number, line in enumerate(text.splitlines(), 1)
                  if line.startswith(('import ', 'import\t'))]
    else:
        chunks = [(1, text)]
    found = []
    for first_line, source in chunks:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError) as exc:
            found.append({'file': path, 'line': first_line + (getattr(exc, 'lineno', 1) or 1) - 1, 'name': '',
                          'how': 'cannot be read as Python (%s)' % exc.__class__.__name__, 'kind': 'python'})
            continue
        found.extend({'file': path, 'line': first_line + line - 1, 'name': name, 'how': how, 'kind': 'python'}
                     for line, name, how in _writes(tree))
    return found


def shell_edits(path, text):
    """Findings of /etc/environment (pam_env) or a /etc/profile.d script: the names assigned, by line."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        match = _SHELL.match(line) or _PAM.match(line)
        if match and not line.lstrip().startswith('#'):
            found.append({'file': path, 'line': number, 'name': match.group(1), 'how': WRITE, 'kind': 'login'})
    return found


def loader_entries(path, text):
    """The directories an ld.so.conf.d file adds, by line (include lines are the main file's business)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.split('#', 1)[0].strip()
        if entry.startswith('/'):
            found.append({'file': path, 'line': number, 'directory': entry})
    return found


# The CUDA runtime's and NCCL's libraries (never the driver's libcuda, which the distro places itself).
CUDA_LIBRARIES = ('libcudart.so', 'libnccl.so', 'libcublas.so', 'libcublasLt.so', 'libnvrtc.so', 'libcudnn.so')
SYSTEM_DIRECTORIES = ('/lib', '/lib64', '/usr/lib', '/usr/lib64', '/usr/local/lib')


def cuda_entries(loader, listdir=os.listdir):
    """The loader entries whose directory holds the CUDA runtime's or NCCL's libraries, with their names; the
    system's own directories (the distro's ld.so.conf.d files) are the distro's business."""
    found = []
    for entry in loader:
        directory = entry['directory'].rstrip('/')
        if directory in SYSTEM_DIRECTORIES or os.path.dirname(directory) in SYSTEM_DIRECTORIES[:4]:
            continue
        try:
            names = sorted(name for name in listdir(directory) if name.startswith(CUDA_LIBRARIES))
        except OSError:
            continue
        if names:
            found.append(dict(entry, libraries=names))
    return found


def parse_ldconfig_cache(text):
    """{soname: first path} of `ldconfig -p`: the loader takes the first entry the cache lists for a name."""
    resolved = {}
    for line in text.splitlines():
        match = re.match(r'^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$', line)
        # "(libc6)" alone is a 32-bit library on a 64-bit host: never the one a 64-bit server loads.
        if match and match.group(2) != 'libc6':
            resolved.setdefault(match.group(1), match.group(3))
    return resolved


def _place(finding):
    return '%s line %s' % (finding['file'], finding['line'])


def loader_verdicts(loader, resolved, owned_roots, sonames, realpath=os.path.realpath):
    """[(entry, sonames the loader takes from it)] of the foreign entries (the collection's own left out)."""
    # Compared as the loader finds them: /usr/local/cuda is often a link to the toolkit itself.
    roots = tuple(realpath(root).rstrip('/') + '/' for root in owned_roots if root)
    verdicts = []
    for entry in loader:
        directory = realpath(entry['directory']).rstrip('/') + '/'
        if roots and directory.startswith(roots):
            continue  # the collection's own (cuda_toolkit's file points into the toolkit)
        verdicts.append((entry, sorted(soname for soname in sonames
                                       if resolved.get(soname) and realpath(resolved[soname]).startswith(directory))))
    return verdicts


def judge(findings, managed, loader, resolved, owned_roots, sonames, realpath=os.path.realpath):
    """(problems, warnings), one line each. findings: python_edits and shell_edits; managed: the names the spec sets
    (PATH included); loader: loader_entries of the files the roles do not own; resolved: parse_ldconfig_cache;
    owned_roots: the directories the collection's libraries live under; sonames: the libraries that must come from
    them (libcudart.so.N, libnccl.so.2)."""
    problems, warnings = [], []
    for finding in findings:
        name, how = finding['name'], finding['how']
        if not name:
            warnings.append('%s %s' % (_place(finding), how))
        elif finding['kind'] == 'python' and how in (WRITE, REMOVE) and (name in managed or name == '?'):
            problems.append('%s %s %s while every Python of the host starts, after the runtime environment\'s hook: '
                            'the server would see that, not the spec\'s value; remove the line (keep a copy)'
                            % (_place(finding), how, name if name != '?' else 'a variable it computes'))
        elif finding['kind'] == 'python':
            warnings.append('%s %s %s while every Python of the host starts%s'
                            % (_place(finding), how, name, '' if name in managed else ', beyond the spec'))
        elif name in managed:
            warnings.append('%s %s %s for login shells (no unit reads it; the spec\'s value is what the server gets)'
                            % (_place(finding), how, name))
    for entry, taken in loader_verdicts(loader, resolved, owned_roots, sonames, realpath):
        if taken:
            problems.append('%s adds %s, from which the loader now resolves %s instead of the collection\'s: move '
                            'that file aside (keep a copy) and run ldconfig'
                            % (_place(entry), entry['directory'], ', '.join(taken)))
        else:
            warnings.append('%s adds %s, a library directory the collection does not own'
                            % (_place(entry), entry['directory']))
    return problems, warnings


def start_up_files(stdlib, sites, user_sites, listdir=os.listdir, isfile=os.path.isfile):
    """The Python start-up files site.py would run, in its order: every .pth of each site directory (the venv's, the
    system's; the user site's), then sitecustomize and usercustomize as imported from the stdlib or a site
    directory. The collection's own hook files are the caller's to leave out."""
    files = []
    for directory in list(sites) + list(user_sites):
        try:
            names = sorted(listdir(directory))
        except OSError:
            continue
        files.extend(os.path.join(directory, name) for name in names if name.endswith('.pth'))
    for directory in [stdlib] + list(sites) + list(user_sites):
        for name in ('sitecustomize.py', 'usercustomize.py'):
            path = os.path.join(directory, name)
            if directory and isfile(path) and path not in files:
                files.append(path)
    return files
