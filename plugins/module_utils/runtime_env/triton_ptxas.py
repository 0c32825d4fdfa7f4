# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which ptxas Triton assembles each GPU architecture with, proven by compiling a kernel for it.

Triton picks its ptxas per target (triton/backends/nvidia/compiler.py, get_ptxas): from 3.6 on,
compute capability >= 100 runs TRITON_PTXAS_BLACKWELL_PATH, else its bundled ptxas-blackwell (CUDA
12.9 in 3.6.0), and below 100 TRITON_PTXAS_PATH, else its bundled ptxas (CUDA 12.8); Triton 3.5 reads
TRITON_PTXAS_PATH for every target. A path it cannot run falls back to the bundled binary without a
word (triton/knobs.py, env_nvidia_tool.transform). So setting a variable proves nothing: the probe
compiles a tiny kernel ahead of time for each architecture (triton.compile with an explicit
GPUTarget needs no GPU) in a fresh cache, so Triton must run ptxas, and reports the ptxas Triton
resolved for that target (path and `release X.Y`) and the PTX ISA it wrote, which Triton derives
from that ptxas's release. judge() holds them against the toolkit's ptxas.

The probe runs in the release's interpreter with TRITON_PTXAS_PATH and TRITON_PTXAS_BLACKWELL_PATH
removed from its environment: the values it sees are the ones the runtime_env start-up hook gives
every process of the venv.
"""

from __future__ import annotations

import json
import os

# The compute capabilities Triton's NVIDIA backend and CUDA 13's ptxas both target (sm_75 and up).
MIN_CAPABILITY = 75
# From this capability on, Triton 3.6+ reads TRITON_PTXAS_BLACKWELL_PATH (compiler.py: arch >= 100).
BLACKWELL_CAPABILITY = 100
PTXAS_VARS = ('TRITON_PTXAS_PATH', 'TRITON_PTXAS_BLACKWELL_PATH')

# Written to a file and run there: @triton.jit reads its function's source (inspect), which a
# `python -c` string does not have.
PROBE_SOURCE = r'''
import json
import os
import shutil
import sys
import tempfile

# A fresh cache, so that Triton must run ptxas; removed when the probe ends.
CACHE = os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="inferops-triton-probe-")


def main():
    with open(sys.argv[1]) as handle:
        request = json.load(handle)
    try:
        import triton
        import triton.language as tl
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia import compiler as nvidia
        from triton.compiler import ASTSource
    except ImportError as exc:
        print(json.dumps({"triton": None, "error": "%s: %s" % (type(exc).__name__, exc)}))
        return

    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)

    def resolved_ptxas(capability):
        try:
            tool = nvidia.get_ptxas(capability)  # 3.6 and later: per target
        except TypeError:
            tool = nvidia.get_ptxas()  # 3.5: one ptxas for every target
        return tool.path, tool.version

    archs = []
    for capability in request["capabilities"]:
        entry = {"capability": capability}
        try:
            entry["ptxas"], entry["ptxas_release"] = resolved_ptxas(capability)
            source = ASTSource(fn=add_one, signature={"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                               constexprs={"BLOCK": 128})
            kernel = triton.compile(source, target=GPUTarget("cuda", capability, 32))
            lines = kernel.asm["ptx"].splitlines()
            entry["ptx_version"] = next((l.split()[1] for l in lines if l.startswith(".version ")), None)
            entry["ptx_target"] = next((l.split()[1] for l in lines if l.startswith(".target ")), None)
            entry["cubin_bytes"] = len(kernel.asm["cubin"])
        except Exception as exc:  # every failure is the answer for that target
            entry["error"] = "%s: %s" % (type(exc).__name__, str(exc).strip()[-2000:])
        archs.append(entry)
    print(json.dumps({"triton": triton.__version__, "archs": archs}))


try:
    main()
finally:
    shutil.rmtree(CACHE, ignore_errors=True)
'''


def capabilities(archs):
    """[(arch, capability)] for sm_XX[a|f] names, in order, without repeats of a capability."""
    seen, out = set(), []
    for arch in archs:
        number = int(arch[3:].rstrip('af'))
        if number not in seen:
            seen.add(number)
            out.append((arch, number))
    return out


def ptx_isa(release):
    """The PTX ISA Triton writes for a ptxas release (compiler.py, ptx_get_version): 12.5 -> 8.5,
    12.8 -> 8.7, 12.9 -> 8.8, 13.0 -> 9.0; None for a release it does not map."""
    try:
        major, minor = (int(part) for part in release.split('.')[:2])
    except (AttributeError, ValueError):
        return None
    if major >= 13:
        number = 90 + (major - 13) * 10 + minor
    elif major == 12:
        number = 80 + minor - (1 if minor >= 6 else 0)
    else:
        return None
    return '%d.%d' % (number // 10, number % 10)


def probe_argv(python, script, request):
    """The probe without the two ptxas variables of the caller's environment (env(1) -u). The request
    is a file, not stdin: an interpreter that dies at start would break the pipe, and run_command
    would fail without its output."""
    argv = ['env']
    for name in PTXAS_VARS:
        argv += ['-u', name]
    return argv + [python, '-B', script, request]


def parse_answer(out):
    """The probe's JSON answer (its last line), or None."""
    for line in reversed((out or '').strip().splitlines()):
        try:
            answer = json.loads(line)
        except ValueError:
            continue
        if isinstance(answer, dict) and 'triton' in answer:
            return answer
    return None


def _variable(capability, triton_version):
    """The variable Triton reads for this target."""
    try:
        major, minor = (int(part) for part in triton_version.split('.')[:2])
    except (AttributeError, ValueError):
        major, minor = 0, 0
    if capability >= BLACKWELL_CAPABILITY and (major, minor) >= (3, 6):
        return 'TRITON_PTXAS_BLACKWELL_PATH'
    return 'TRITON_PTXAS_PATH'


def judge(answer, archs, toolkit_ptxas, toolkit_release, realpath=os.path.realpath):
    """(results, problems) of the probe's answer: per architecture, whether Triton resolved the
    toolkit's ptxas (same file, same release) and wrote the PTX ISA of that release."""
    results, problems = [], []
    entries = dict((entry.get('capability'), entry) for entry in answer.get('archs', []))
    triton_version = answer.get('triton') or ''
    wanted = realpath(toolkit_ptxas)
    isa = ptx_isa(toolkit_release)
    for arch, capability in capabilities(archs):
        variable = _variable(capability, triton_version)
        result = dict(arch=arch, capability=capability, variable=variable, supported=capability >= MIN_CAPABILITY,
                      ptxas='', ptxas_release='', ptx_version='', ok=False)
        results.append(result)
        if not result['supported']:
            result['ok'] = True
            continue
        entry = entries.get(capability)
        if entry is None:
            problems.append('%s: the probe gave no answer for it' % arch)
            continue
        result.update(ptxas=entry.get('ptxas') or '', ptxas_release=entry.get('ptxas_release') or '',
                      ptx_version=entry.get('ptx_version') or '')
        if entry.get('error'):
            problems.append('%s: Triton %s could not compile a kernel for it: %s' % (arch, triton_version, entry['error']))
        elif realpath(result['ptxas']) != wanted or result['ptxas_release'] != toolkit_release:
            problems.append('%s: Triton %s assembles it with %s (CUDA %s), not the toolkit\'s %s (CUDA %s); Triton reads '
                            '%s for this target and falls back to its bundled ptxas when that is unset or cannot run: '
                            'set it to the toolkit\'s ptxas (runtime_env_ptxas%s)'
                            % (arch, triton_version, result['ptxas'] or '(none)', result['ptxas_release'] or '?',
                               toolkit_ptxas, toolkit_release, variable,
                               '_blackwell' if variable == 'TRITON_PTXAS_BLACKWELL_PATH' else ''))
        elif isa is not None and result['ptx_version'] != isa:
            problems.append('%s: the PTX Triton wrote is ISA %s, not %s of CUDA %s\'s ptxas'
                            % (arch, result['ptx_version'] or '(none)', isa, toolkit_release))
        else:
            result['ok'] = True
    return results, problems
