# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers of the cuda_toolkit role's modules.

Parsing of tool output (nvcc/ptxas versions, ldconfig -p), reading the target
architecture of a cubin from its ELF header, checking the modules' arguments, and
planning the symlink tree that turns NVIDIA's PyPI wheels into a normal toolkit
layout. Nothing here runs a command; the file system is only read (planning) or
changed through apply_links.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import struct

from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import replace_symlink

RELEASE_RE = re.compile(r'release (\d+)\.(\d+), V(\d+(?:\.\d+)+)')
LDCONFIG_RE = re.compile(r'^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$')
EM_CUDA = 190
SKIP_ENTRIES = ('__init__.py', '__pycache__')

# Every pattern ends at \Z: `$` also matches before a trailing newline.
ARCH_RE = re.compile(r'sm_(\d+)[af]?\Z')
VERSION_RE = re.compile(r'[0-9]+\.[0-9]+\Z')
# A relative path inside its base: plain segments, none of them "." or "..".
SEGMENT = r'[A-Za-z0-9_.+-]+'
RELATIVE_RE = re.compile(r'%s(?:/%s)*\Z' % (SEGMENT, SEGMENT))
DOT_SEGMENT_RE = re.compile(r'(?:^|/)\.\.?(?:/|\Z)')
GLOB_RE = re.compile(r'[A-Za-z0-9_.+*?\[\]-]+\Z')
COMMAND_NAME_RE = re.compile(r'[A-Za-z0-9_.+-]+\Z')
CONTROL_RE = re.compile(r'[\x00-\x1f\x7f]')
URL_RE = re.compile(r'(?:https?|file)://\S+\Z')
WHEEL_NAME_RE = re.compile(r'[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\Z')
WHEEL_VERSION_RE = re.compile(r'[A-Za-z0-9.+!_-]+\Z')
SHA256_RE = re.compile(r'[0-9a-fA-F]{64}\Z')
LAYOUT_KINDS = ('cu12', 'cu13')
RELATIVE_ALLOWED = 'a relative path (segments of A-Z a-z 0-9 _ . + -, none of them "." or "..", no leading "/")'

# A tiny kernel, device code only. KERNEL_PTX is what nvcc 13.0 makes of KERNEL_CU with
# -arch=compute_75, lowered to PTX ISA 8.0 (CUDA 12.0) so that every ptxas since 12.0
# reads it; ptxas compiles it for any newer sm_XX.
KERNEL_CU = r'''extern "C" __global__ void inferops_axpy(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''
KERNEL_PTX = r'''.version 8.0
.target sm_75
.address_size 64

.visible .entry inferops_axpy(
    .param .f32 inferops_axpy_param_0,
    .param .u64 inferops_axpy_param_1,
    .param .u64 inferops_axpy_param_2,
    .param .u32 inferops_axpy_param_3
)
{
    .reg .pred     %p<2>;
    .reg .f32     %f<5>;
    .reg .b32     %r<6>;
    .reg .b64     %rd<8>;

    ld.param.f32     %f1, [inferops_axpy_param_0];
    ld.param.u64     %rd1, [inferops_axpy_param_1];
    ld.param.u64     %rd2, [inferops_axpy_param_2];
    ld.param.u32     %r2, [inferops_axpy_param_3];
    mov.u32     %r3, %ctaid.x;
    mov.u32     %r4, %ntid.x;
    mov.u32     %r5, %tid.x;
    mad.lo.s32     %r1, %r3, %r4, %r5;
    setp.ge.s32     %p1, %r1, %r2;
    @%p1 bra     $L__BB0_2;

    cvta.to.global.u64     %rd3, %rd2;
    cvta.to.global.u64     %rd4, %rd1;
    mul.wide.s32     %rd5, %r1, 4;
    add.s64     %rd6, %rd4, %rd5;
    ld.global.f32     %f2, [%rd6];
    add.s64     %rd7, %rd3, %rd5;
    ld.global.f32     %f3, [%rd7];
    fma.rn.f32     %f4, %f2, %f1, %f3;
    st.global.f32     [%rd7], %f4;

$L__BB0_2:
    ret;

}
'''


def parse_release(text):
    """(major.minor, full version) from `nvcc --version` / `ptxas --version`, or (None, None)."""
    match = RELEASE_RE.search(text or '')
    if not match:
        return None, None
    return '%s.%s' % (match.group(1), match.group(2)), match.group(3)


def parse_ldconfig(text):
    """`ldconfig -p` output as {soname: [(flags, path), ...]} in cache order."""
    entries = {}
    for line in (text or '').splitlines():
        match = LDCONFIG_RE.match(line)
        if match:
            entries.setdefault(match.group(1), []).append((match.group(2), match.group(3)))
    return entries


def ldconfig_flags_for(machine):
    """The ldconfig -p flag that marks libraries of this machine (uname -m)."""
    return {'x86_64': 'x86-64', 'aarch64': 'AArch64'}.get(machine, machine)


def resolve_soname(entries, soname, machine):
    """The path the dynamic loader takes for soname: the first cache entry of this machine."""
    flag = ldconfig_flags_for(machine)
    for flags, path in entries.get(soname, []):
        if flag in flags.split(','):
            return path
    return None


def path_within(path, root):
    """True when path, with symlinks resolved, lies inside root (also resolved)."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def cubin_arch(data):
    """The sm number a cubin was built for, read from its ELF header.

    CUDA ELF (e_machine 190) keeps the architecture in e_flags: in the low byte for ABI
    version 7 and older (EI_OSABI 0x33), in bits 8-15 from ABI version 8 (EI_OSABI 0x41,
    ptxas 12.8 for sm_100+ and ptxas 13 for everything).
    """
    if len(data) < 64 or data[:4] != b'\x7fELF':
        raise ValueError('not an ELF file')
    if data[4] != 2 or data[5] != 1:
        raise ValueError('not a 64-bit little-endian ELF file')
    machine = struct.unpack_from('<H', data, 18)[0]
    if machine != EM_CUDA:
        raise ValueError('ELF machine %d is not CUDA (%d)' % (machine, EM_CUDA))
    flags = struct.unpack_from('<I', data, 48)[0]
    abi_version = data[8]
    if abi_version >= 8:
        return (flags >> 8) & 0xff
    return flags & 0xff


def arch_number(arch):
    """sm_120 -> 120, sm_90a -> 90."""
    match = ARCH_RE.match(arch) if isinstance(arch, str) else None
    if not match:
        raise ValueError('not an sm_XX architecture: %s' % arch)
    return int(match.group(1))


def show(value):
    """A value as it appears in messages: JSON, so that a trailing newline or a type is visible."""
    return json.dumps(value, sort_keys=True)


def is_relative(path):
    """True for a plain relative path that stays inside its base directory."""
    return isinstance(path, str) and bool(RELATIVE_RE.match(path)) and not DOT_SEGMENT_RE.search(path)


def is_absolute(path):
    """True for an absolute path without "." or ".." segments and without control characters."""
    return (isinstance(path, str) and path.startswith('/') and not CONTROL_RE.search(path)
            and not DOT_SEGMENT_RE.search(path))


def absolute_error(option, value, empty_ok=False):
    """Message when value is not an absolute path (or "" where allowed), else None."""
    if (empty_ok and value == '') or is_absolute(value):
        return None
    return '%s must be an absolute path%s (got %s)' % (option, ' or ""' if empty_ok else '', show(value))


def command_error(option, value):
    """Message when value is neither "", a command name looked up in PATH nor an absolute path."""
    if value == '' or (isinstance(value, str) and COMMAND_NAME_RE.match(value)) or is_absolute(value):
        return None
    return '%s must be a command name (looked up in PATH) or an absolute path (got %s)' % (option, show(value))


def version_error(option, value):
    if isinstance(value, str) and VERSION_RE.match(value):
        return None
    return '%s must be a CUDA version "major.minor" such as "13.0" (got %s)' % (option, show(value))


def archs_errors(option, archs):
    return ['%s: %s is not an architecture sm_XX (digits, optionally followed by a or f)' % (option, show(arch))
            for arch in archs if not (isinstance(arch, str) and ARCH_RE.match(arch))]


def find_links_errors(option, links):
    return ['%s: %s must be an absolute directory or a URL (http, https, file)' % (option, show(link))
            for link in links if not (is_absolute(link) or (isinstance(link, str) and URL_RE.match(link)))]


def layout_errors(layout, option='layout'):
    """Why a wheels layout is unsafe or malformed (an empty list when it is fine).

    Every path is relative to its base (the toolkit home, or the wheels directory for
    merge.from) and never leaves it: a link key "/etc/x" or "../x" would put a symlink
    outside the toolkit. Link targets stay inside the link's own directory tree.
    """
    if not isinstance(layout, dict):
        return ['%s must be a mapping (got %s)' % (option, show(layout))]
    errors = []
    unknown = sorted(set(layout) - set(('kind', 'merge', 'links', 'required')))
    if unknown:
        errors.append('%s has unknown keys %s (allowed: kind, merge, links, required)' % (option, show(unknown)))
    if layout.get('kind') not in LAYOUT_KINDS:
        errors.append('%s.kind must be one of %s (got %s)' % (option, ', '.join(LAYOUT_KINDS), show(layout.get('kind'))))

    def path_error(where, path):
        if not is_relative(path):
            errors.append('%s %s must be %s' % (where, show(path), RELATIVE_ALLOWED))

    merges = layout.get('merge') or []
    if not isinstance(merges, list):
        errors.append('%s.merge must be a list (got %s)' % (option, show(merges)))
        merges = []
    for index, merge in enumerate(merges):
        where = '%s.merge[%d]' % (option, index)
        if not isinstance(merge, dict) or set(merge) - set(('dest', 'from', 'match')):
            errors.append('%s must be a mapping with keys dest, from and optionally match (got %s)' % (where, show(merge)))
            continue
        path_error(where + '.dest', merge.get('dest'))
        sources = merge.get('from')
        if not isinstance(sources, list) or not sources:
            errors.append('%s.from must be a non-empty list of paths (got %s)' % (where, show(sources)))
            sources = []
        for source in sources:
            path_error(where + '.from', source)
        match = merge.get('match')
        if match is not None and not (isinstance(match, str) and GLOB_RE.match(match)):
            errors.append('%s.match %s must be a file name pattern (A-Z a-z 0-9 _ . + - * ? [ ], no "/")'
                          % (where, show(match)))
    links = layout.get('links') or {}
    if not isinstance(links, dict):
        errors.append('%s.links must be a mapping (got %s)' % (option, show(links)))
        links = {}
    for link, target in sorted(links.items(), key=lambda item: str(item[0])):
        path_error('%s.links key' % option, link)
        if not is_relative(target):
            errors.append('%s.links[%s] target %s must be %s' % (option, show(link), show(target), RELATIVE_ALLOWED))
    required = layout.get('required') or []
    if not isinstance(required, list):
        errors.append('%s.required must be a list (got %s)' % (option, show(required)))
        required = []
    for path in required:
        path_error('%s.required' % option, path)
    return errors


def wheels_errors(wheels, option='wheels'):
    """Why a pin set cannot go into a pip requirements file as it is (an empty list when it is fine)."""
    if not isinstance(wheels, list) or not wheels:
        return ['%s must be a non-empty list of {name, version, sha256} (got %s)' % (option, show(wheels))]
    errors = []
    for index, wheel in enumerate(wheels):
        where = '%s[%d]' % (option, index)
        if not isinstance(wheel, dict):
            errors.append('%s must be a mapping {name, version, sha256} (got %s)' % (where, show(wheel)))
            continue
        if not (isinstance(wheel.get('name'), str) and WHEEL_NAME_RE.match(wheel['name'])):
            errors.append('%s.name %s must be a distribution name (A-Z a-z 0-9 . _ -)' % (where, show(wheel.get('name'))))
        if not (isinstance(wheel.get('version'), str) and WHEEL_VERSION_RE.match(wheel['version'])):
            errors.append('%s.version %s must be an exact version (A-Z a-z 0-9 . + ! _ -)'
                          % (where, show(wheel.get('version'))))
        digests = wheel.get('sha256')
        if (not isinstance(digests, list) or not digests
                or not all(isinstance(digest, str) and SHA256_RE.match(digest) for digest in digests)):
            errors.append('%s.sha256 %s must be a non-empty list of sha256 digests (64 hex digits)' % (where, show(digests)))
    return errors


def requirement_lines(wheels):
    """pip requirement lines with every pinned hash (one per platform)."""
    lines = []
    for wheel in wheels:
        hashes = ' '.join('--hash=sha256:%s' % digest for digest in wheel['sha256'])
        lines.append('%s==%s %s' % (wheel['name'], wheel['version'], hashes))
    return '\n'.join(lines) + '\n'


def stamp_text(version, layout, wheels):
    """The marker written after a successful install: the exact pin set and layout kind."""
    pins = sorted('%s==%s' % (wheel['name'], wheel['version']) for wheel in wheels)
    return json.dumps({'cuda_version': version, 'layout': layout, 'wheels': pins}, indent=2, sort_keys=True) + '\n'


def plan_links(home, site, layout, listdir=os.listdir, isdir=os.path.isdir):
    """The symlinks that lay the wheels in site out as a toolkit tree in home.

    layout['merge'] is a list of {dest, from: [dirs relative to site], match (optional glob)}:
    every entry of each source directory gets a link dest/<entry> (the first source wins).
    layout['links'] maps extra link paths (relative to home) to their literal targets.
    Returns {path relative to home: link target, relative to the link's directory}.
    """
    plan = {}
    for merge in layout.get('merge', []):
        dest = merge['dest']
        for source in merge['from']:
            source_dir = os.path.join(site, source)
            if not isdir(source_dir):
                continue
            for entry in sorted(listdir(source_dir)):
                if entry in SKIP_ENTRIES or entry.endswith('.dist-info'):
                    continue
                if merge.get('match') and not fnmatch.fnmatch(entry, merge['match']):
                    continue
                link = os.path.join(dest, entry)
                if link in plan:
                    continue
                plan[link] = os.path.relpath(os.path.join(source_dir, entry), os.path.join(home, dest))
    for link, target in layout.get('links', {}).items():
        plan.setdefault(link, target)
    return plan


def managed_dirs(layout):
    """Directories (relative to home) whose links this layout owns."""
    dirs = set(merge['dest'] for merge in layout.get('merge', []))
    dirs.update(os.path.dirname(link) for link in layout.get('links', {}))
    return sorted(d for d in dirs if d)


def link_changes(home, site, plan, dirs):
    """(to_create {rel: target}, to_remove [rel], conflicts [rel]) to reach plan in home.

    A path in the way that is not a symlink is a conflict: the tree is never clobbered.
    Symlinks in the managed directories that point into site but are no longer planned
    (an older pin set) are removed.
    """
    create, conflicts = {}, []
    for rel, target in sorted(plan.items()):
        path = os.path.join(home, rel)
        if os.path.islink(path):
            if os.readlink(path) != target:
                create[rel] = target
        elif os.path.lexists(path):
            conflicts.append(rel)
        else:
            create[rel] = target
    remove = []
    real_site = os.path.realpath(site)
    for rel_dir in dirs:
        directory = os.path.join(home, rel_dir)
        if not os.path.isdir(directory) or os.path.islink(directory):
            continue
        for entry in sorted(os.listdir(directory)):
            rel = os.path.join(rel_dir, entry)
            path = os.path.join(home, rel)
            if rel in plan or not os.path.islink(path):
                continue
            target = os.path.normpath(os.path.join(directory, os.readlink(path)))
            if target == real_site or target.startswith(real_site + os.sep) or not os.path.exists(path):
                remove.append(rel)
    return create, remove, conflicts


def apply_links(home, create, remove):
    """Make the planned changes: parents are real directories, links are replaced atomically."""
    for rel in remove:
        os.unlink(os.path.join(home, rel))
    for rel, target in sorted(create.items()):
        path = os.path.join(home, rel)
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            os.makedirs(parent, 0o755)
        replace_symlink(path, target)


def planned_source(home, plan, rel):
    """Where rel (relative to home) leads through the planned links, or None when no link covers it."""
    parts = rel.split('/')
    for cut in range(len(parts), 0, -1):
        link = '/'.join(parts[:cut])
        if link in plan:
            base = os.path.join(home, os.path.dirname(link), plan[link])
            return os.path.normpath(os.path.join(base, *parts[cut:])) if parts[cut:] else os.path.normpath(base)
    return None


def site_is_complete(home, plan, required):
    """True when every required path is covered by a planned link whose source exists."""
    for rel in required:
        source = planned_source(home, plan, rel)
        if source is None or not os.path.exists(source):
            return False
    return True


def missing_paths(home, required):
    """Required paths (relative to home) that do not resolve to an existing file or directory."""
    return [rel for rel in required if not os.path.exists(os.path.join(home, rel))]
