# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ELF ABI check: do torch's shared libraries export every torch symbol an extension imports?

The symbol tables come from binutils (``nm -D -P``) and names are demangled with ``c++filt``:
both are in one distro package on every target, and pyelftools would still need a demangler
and would have to be installed into the target interpreter or the pinned venv.
Running the tools is passed in (``run_command``), so the logic is tested without a target.
"""

from __future__ import annotations

import re

TORCH_NAMESPACES = ('c10', 'at', 'torch')

# Itanium C++ ABI special names in front of the encoding: vtable, VTT, typeinfo (name),
# guard variable, reference temporary, and the this-adjusting thunks.
_SPECIAL = re.compile(r'^(?:TV|TT|TI|TS|GV|GR|Thn?\d+_|Tvn?\d+_n?\d+_)')
_SOURCE_NAME = re.compile(r'^(\d+)')
_IDENTIFIER = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*\Z')
# Arguments per c++filt call: far below Linux's 128 KiB per-string and 2 MiB total limits.
_ARGV_BYTES = 64 * 1024
# nm types of undefined dynamic symbols; w and v are weak: the loader tolerates their absence.
_UNDEFINED = 'U'
_WEAK_UNDEFINED = ('w', 'v')
ELF_MAGIC = b'\x7fELF'


class AbiToolError(Exception):
    """nm or c++filt could not read a file; the text says which and why."""


def top_namespace(mangled):
    """Outermost scope of a mangled C++ name: ``_ZN3c104cuda1fEi`` -> ``c10``.

    Returns ``std`` for ``St`` names and None for C symbols and names at global scope.
    """
    if not mangled.startswith('_Z'):
        return None
    rest = _SPECIAL.sub('', mangled[2:], count=1)
    if rest.startswith('Z'):  # local entity: its enclosing function's encoding follows
        rest = rest[1:]
    if rest.startswith('L'):  # internal linkage
        rest = rest[1:]
    if rest.startswith('St'):
        return 'std'
    if not rest.startswith('N'):
        return None
    rest = rest[1:].lstrip('rVK')
    rest = rest[1:] if rest[:1] in ('R', 'O') else rest
    if rest.startswith('St'):
        return 'std'
    match = _SOURCE_NAME.match(rest)
    if not match:
        return None
    length = int(match.group(1))
    start = len(match.group(1))
    return rest[start:start + length]


def parse_nm(text):
    """(defined, undefined) symbol name sets from ``nm -D -P`` output; version suffixes dropped."""
    defined, undefined = set(), set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        name, kind = fields[0].split('@', 1)[0], fields[1]
        if kind == _UNDEFINED:
            undefined.add(name)
        elif kind not in _WEAK_UNDEFINED:
            defined.add(name)
    return defined, undefined


def function_base(demangled):
    """The part of a demangled name before its parameter list: what two overloads share."""
    depth = 0
    for index, char in enumerate(demangled):
        if char == '<':
            depth += 1
        elif char == '>':
            depth -= 1
        elif char == '(' and depth == 0 and not demangled[:index].endswith('operator'):
            return demangled[:index]
    return demangled


class SymbolReader:
    """Reads dynamic symbol tables with nm and demangles with c++filt, caching per path."""

    def __init__(self, run_command, nm='nm', cxxfilt='c++filt'):
        self.run_command = run_command
        self.nm = nm
        self.cxxfilt = cxxfilt
        self._cache = {}

    def symbols(self, path):
        if path not in self._cache:
            rc, out, err = self.run_command([self.nm, '-D', '-P', path])
            if rc != 0:
                if 'no symbols' in err:
                    out = ''
                else:
                    raise AbiToolError('`%s -D -P %s` failed (rc=%d): %s' % (self.nm, path, rc, err.strip()))
            self._cache[path] = parse_nm(out)
        return self._cache[path]

    def demangle(self, names):
        """Demangled forms, in order. Names go as arguments, in chunks: feeding a large stdin to a
        process whose output is read only afterwards deadlocks once both pipes are full."""
        names = list(names)
        if not names or not self.cxxfilt:
            return names
        lines = []
        for chunk in _chunks(names, _ARGV_BYTES):
            rc, out, err = self.run_command([self.cxxfilt, '--'] + chunk)
            got = out.splitlines()
            if rc != 0 or len(got) != len(chunk):
                raise AbiToolError('`%s` failed (rc=%d): %s' % (self.cxxfilt, rc, err.strip()))
            lines += got
        return lines


def _chunks(names, max_bytes):
    chunk, size = [], 0
    for name in names:
        if chunk and size + len(name) + 1 > max_bytes:
            yield chunk
            chunk, size = [], 0
        chunk.append(name)
        size += len(name) + 1
    if chunk:
        yield chunk


def source_name_key(base):
    """The mangled spelling (``<length><identifier>``) of the innermost plain identifier of a
    demangled function base, e.g. ``29c10_cuda_check_implementation``; every overload of that
    function carries it in its mangled name. None when there is no such identifier."""
    scope = base.split('operator', 1)[0]
    plain, depth = [], 0
    for char in scope:
        if char == '<':
            depth += 1
        elif char == '>':
            depth = max(depth - 1, 0)
        elif depth == 0:
            plain.append(char)
    for part in reversed(''.join(plain).split('::')):
        name = part.split(' ')[-1].lstrip('~')
        if _IDENTIFIER.match(name):
            return '%d%s' % (len(name), name)
    return None


def check_abi(extensions, providers, reader, namespaces=TORCH_NAMESPACES):
    """Undefined symbols of ``extensions`` in ``namespaces`` that no provider exports.

    extensions, providers: paths of ELF shared objects. reader: a SymbolReader.
    Returns a dict: ``checked`` (extension paths), ``providers``, ``required`` (how many
    namespace symbols the extensions import) and ``missing``, one entry per unresolved symbol
    with the ``library`` needing it, the ``symbol``, its ``demangled`` form and ``candidates``:
    what the providers export under the same name with another signature (the usual ABI break).
    """
    namespaces = tuple(namespaces)
    exported = set()
    for provider in providers:
        exported |= reader.symbols(provider)[0]
    missing, required = [], 0
    for library in extensions:
        for symbol in sorted(reader.symbols(library)[1]):
            if top_namespace(symbol) not in namespaces:
                continue
            required += 1
            if symbol not in exported:
                missing.append({'library': library, 'symbol': symbol})
    if missing:
        demangled = reader.demangle(entry['symbol'] for entry in missing)
        bases = [function_base(name) for name in demangled]
        keys = set(source_name_key(base) for base in bases)
        # Demangle only the exports that can be an overload of a missing function: torch exports
        # well over 100k symbols, and the missing ones are few.
        pool = sorted(name for name in exported
                      if (None in keys or any(key in name for key in keys)) and top_namespace(name) in namespaces)
        by_base = {}
        for name in reader.demangle(pool):
            by_base.setdefault(function_base(name), []).append(name)
        for entry, name, base in zip(missing, demangled, bases):
            entry['demangled'] = name
            entry['candidates'] = sorted(by_base.get(base, []))
    return {'checked': list(extensions), 'providers': list(providers), 'required': required, 'missing': missing}


def describe_missing(entry, provider_name='torch'):
    text = '%s needs %s, which %s does not export' % (entry['library'], entry['demangled'], provider_name)
    if entry.get('candidates'):
        text += ' (it exports %s)' % '; '.join(entry['candidates'])
    return text


def is_elf(path, read_head=None):
    try:
        if read_head is not None:
            return read_head(path) == ELF_MAGIC
        with open(path, 'rb') as handle:
            return handle.read(4) == ELF_MAGIC
    except (IOError, OSError):
        return False
