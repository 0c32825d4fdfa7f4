# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers of the cuda_toolkit role's modules.

Parsing of tool output (nvcc/ptxas versions, ldconfig -p), reading the target
architecture of a cubin from its ELF header, and planning the symlink tree that
turns NVIDIA's PyPI wheels into a normal toolkit layout. Nothing here runs a
command; the file system is only read (planning) or changed through apply_links.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import struct

RELEASE_RE = re.compile(r'release (\d+)\.(\d+), V(\d+(?:\.\d+)+)')
LDCONFIG_RE = re.compile(r'^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$')
EM_CUDA = 190
SKIP_ENTRIES = ('__init__.py', '__pycache__')

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
    match = re.match(r'^sm_(\d+)[af]?$', arch)
    if not match:
        raise ValueError('not an sm_XX architecture: %s' % arch)
    return int(match.group(1))


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
        tmp = path + '.inferops-tmp'
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(target, tmp)
        os.rename(tmp, path)


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
