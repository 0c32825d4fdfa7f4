# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_health checks: each takes parsed data (gpu_health_parse, gpu_facts) and returns one
result dict {'status', 'value', 'summary', 'problems', 'hint'}; every problem is one line naming
the subject (GPU, bus id, bridge), the bad value and the fix. Nothing here touches the host.
"""

from __future__ import annotations

import re

from ansible_collections.inferops.gpu.plugins.module_utils.gpu.health_parse import normalize_bdf

OK, WARN, FAIL, SKIPPED = 'ok', 'warn', 'fail', 'skipped'
_SEVERITY = {OK: 0, SKIPPED: 0, WARN: 1, FAIL: 2}

# Wording after NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors), shortened to the action.
XID_MEANINGS = {
    13: 'Graphics engine exception (application error)',
    31: 'GPU memory page fault (application error)',
    43: 'GPU stopped processing (application error)',
    45: 'preemptive cleanup after a previous error',
    48: 'double-bit ECC error (DBE): drain and reset',
    63: 'ECC page retirement or row remap recorded',
    64: 'ECC page retirement or row remap failed',
    74: 'NVLink error',
    79: 'GPU has fallen off the bus',
    94: 'contained ECC error',
    95: 'uncontained ECC error: reset the GPU',
    119: 'GSP RPC timeout',
}
# The GPU (or its link) is unusable until a reset or service; the rest are application faults
# or records of something already handled.
XID_FATAL = frozenset([48, 64, 74, 79, 95, 119])
XID_CATALOGUE = 'https://docs.nvidia.com/deploy/xid-errors/'

# Linux driver shipped with each CUDA toolkit (CUDA release notes, table 3): the driver a toolkit
# needs without relying on minor version compatibility.
TOOLKIT_DRIVERS = (
    ((13, 0), '580'), ((12, 9), '575'), ((12, 8), '570'), ((12, 6), '560'), ((12, 5), '555'),
    ((12, 4), '550'), ((12, 3), '545'), ((12, 2), '535'), ((12, 1), '530'), ((12, 0), '525'),
    ((11, 8), '520'),
)

# Clock event reasons that are no fault: an idle GPU clocks down, and application clocks are a
# setting someone chose.
CLOCK_EVENTS_BENIGN = frozenset(['Idle', 'Applications Clocks Setting'])
# The board itself slows the GPU (overheating, power brake from the chassis): a hardware problem.
CLOCK_EVENTS_FATAL = frozenset(['HW Slowdown', 'HW Thermal Slowdown', 'HW Power Brake Slowdown'])
ACS_REDIRECT_BITS = ('SrcValid', 'ReqRedir', 'CmpltRedir')

ACS_HINT = ('ACS redirects peer-to-peer through the root complex (NCCL all-reduce hangs or crawls): disable ACS on '
            'the switch ports (setpci) or in the BIOS')
IOMMU_HINT = 'boot with iommu=pt'
P2P_HINT = ('peer-to-peer blocked: ACS/IOMMU (see the pcie check); NCCL falls back to host memory or hangs; confirm '
            'with NCCL_P2P_DISABLE=1')
CMDLINE_MAX = 160


def result(status, value, summary, problems=(), hint=''):
    return {'status': status, 'value': value, 'summary': summary, 'problems': list(problems), 'hint': hint}


def worst(statuses):
    statuses = list(statuses)
    return max(statuses, key=lambda s: _SEVERITY[s]) if statuses else OK


def version_tuple(version):
    """'580.65.06' -> (580, 65, 6); '13.0' -> (13, 0). ValueError for anything else."""
    if not re.match(r'^\d+(\.\d+)*$', version.strip()):
        raise ValueError('not a version: %r' % version)
    return tuple(int(part) for part in version.strip().split('.'))


def _plural(count, word):
    return '%d %s%s' % (count, word, '' if count == 1 else 's')


def _driver_for_toolkit(toolkit):
    for version, driver in TOOLKIT_DRIVERS:
        if toolkit[:2] >= version:
            return driver
    return None


# driver

def check_driver(driver_version, cuda_driver_version, toolkit_version, min_driver_version):
    """The driver answers, supports the toolkit's CUDA major.minor and is at least min_driver_version.
    toolkit_version / min_driver_version '' -> that part is not checked."""
    value = {'driver': driver_version, 'cuda': cuda_driver_version, 'toolkit': toolkit_version,
             'min_driver': min_driver_version}
    if not driver_version:
        return result(FAIL, value, 'no NVIDIA driver answered',
                      ['no NVIDIA driver answered (nvidia-smi/NVML): install the driver or load its kernel module'],
                      'install the NVIDIA driver and reboot')
    problems = []
    if toolkit_version and cuda_driver_version:
        toolkit = version_tuple(toolkit_version)[:2]
        if version_tuple(cuda_driver_version)[:2] < toolkit:
            needed = _driver_for_toolkit(toolkit)
            problems.append('driver %s supports CUDA %s, toolkit is %s: install a %s driver'
                            % (driver_version, cuda_driver_version, '.'.join(str(n) for n in toolkit),
                               needed + '+' if needed else 'newer'))
    if min_driver_version and version_tuple(driver_version) < version_tuple(min_driver_version):
        problems.append('driver %s is older than the minimum %s: upgrade the NVIDIA driver'
                        % (driver_version, min_driver_version))
    summary = 'driver %s, CUDA %s' % (driver_version, cuda_driver_version or 'unknown')
    if toolkit_version:
        summary += ', toolkit %s' % toolkit_version
    if problems:
        return result(FAIL, value, summary, problems, 'upgrade the NVIDIA driver and reboot')
    return result(OK, value, summary)


# GPUs

def _smi_by_bus(smi):
    return dict((normalize_bdf(gpu['bus_id']), gpu) for gpu in smi)


def _gpu_findings(label, info):
    """[(status, problem)] of one GPU's nvidia-smi -q data."""
    found = []
    remap = info['remapped_rows']
    if remap['pending']:
        found.append((FAIL, '%s has a row remap pending: reset the GPU (nvidia-smi -r) or reboot to apply it' % label))
    if remap['failure']:
        found.append((FAIL, '%s had a row remapping failure: the GPU memory is degraded, have the GPU serviced'
                      % label))
    if info['retired_pages']['pending']:
        found.append((FAIL, '%s has a page retirement pending: reset the GPU (nvidia-smi -r) or reboot' % label))
    ecc = info['ecc_volatile_uncorrectable']
    if ecc:
        found.append((FAIL, '%s has %s since the last reset: drain it and reset the GPU; have it serviced if they '
                      'return' % (label, _plural(ecc, 'volatile uncorrectable ECC error'))))
    if info['persistence_mode'] == 'Disabled':
        found.append((WARN, '%s has persistence mode Disabled: run nvidia-persistenced (or nvidia-smi -pm 1) so the '
                      'driver state stays loaded between jobs' % label))
    for event in info['clock_events_active']:
        if event in CLOCK_EVENTS_FATAL:
            found.append((FAIL, '%s clocks are held down by %s: check cooling, power supply and the chassis '
                          'power brake' % (label, event)))
        elif event not in CLOCK_EVENTS_BENIGN:
            found.append((WARN, '%s clocks are held down by %s: check the power limit (nvidia-smi -q -d POWER) and '
                          'cooling' % (label, event)))
    return found


def check_gpus(gpus, smi, expected_count, compute_capabilities):
    """Count, compute capability and the health nvidia-smi -q reports per GPU.

    gpus: gpu_info's gpus; smi: parse_smi_q(), matched by bus id; expected_count None -> any count;
    compute_capabilities: accepted '12.0' strings, [] -> any."""
    by_bus = _smi_by_bus(smi)
    found = []
    per_gpu = []
    count = len(gpus)
    if expected_count is not None and count < expected_count:
        found.append((FAIL, '%s found, %d expected: check that every GPU is seated and powered and that the '
                      'driver sees it (nvidia-smi -L, lspci)' % (_plural(count, 'GPU'), expected_count)))
    for gpu in sorted(gpus, key=lambda g: g['index']):
        label = 'GPU %d (%s)' % (gpu['index'], gpu['pci_bus_id'])
        capability = gpu.get('compute_capability')
        if compute_capabilities and capability not in compute_capabilities:
            arch = (capability or 'unknown').replace('.', '')
            found.append((FAIL, '%s %s has compute capability %s, not one of %s: run on a host with those GPUs or '
                          'build for sm_%s' % (label, gpu['name'], capability, ', '.join(compute_capabilities), arch)))
        info = by_bus.get(normalize_bdf(gpu['pci_bus_id']))
        entry = {'index': gpu['index'], 'name': gpu['name'], 'bus_id': gpu['pci_bus_id'],
                 'compute_capability': capability}
        if info is None:
            entry['health'] = 'not in nvidia-smi -q'
        else:
            findings = _gpu_findings(label, info)
            found.extend(findings)
            entry.update({
                'health': worst(status for status, dummy in findings),
                'persistence_mode': info['persistence_mode'],
                'ecc_mode': info['ecc_mode'],
                'ecc_volatile_uncorrectable': info['ecc_volatile_uncorrectable'],
                'remapped_rows': info['remapped_rows'],
                'retired_pages': info['retired_pages'],
                'clock_events_active': info['clock_events_active'],
            })
        per_gpu.append(entry)
    status = worst(status for status, dummy in found)
    summary = '%s' % _plural(count, 'GPU')
    if expected_count is not None:
        summary += ' (%d expected)' % expected_count
    names = sorted(set(gpu['name'] for gpu in gpus))
    if names:
        summary += ': %s' % ', '.join(names)
    hint = '' if status == OK else 'fix the GPUs named above; drain a GPU with ECC or remap problems before reuse'
    return result(status, {'count': count, 'expected': expected_count, 'gpus': per_gpu}, summary,
                  [problem for dummy, problem in found], hint)


# kernel log

def check_xid(events):
    """Xid events of the kernel log grouped by code; fatal codes fail, the others warn."""
    by_code = {}
    for event in events:
        entry = by_code.setdefault(event['code'], {'code': event['code'], 'count': 0, 'gpus': [], 'last': ''})
        entry['count'] += 1
        if event['bus_id'] not in entry['gpus']:
            entry['gpus'].append(event['bus_id'])
        entry['last'] = event['line']
    groups = []
    problems = []
    statuses = []
    for code in sorted(by_code):
        entry = by_code[code]
        entry['gpus'].sort()
        entry['meaning'] = XID_MEANINGS.get(code, 'unknown Xid: see NVIDIA Xid catalogue')
        groups.append(entry)
        fatal = code in XID_FATAL
        statuses.append(FAIL if fatal else WARN)
        fix = ('drain the GPU and reset it (nvidia-smi -r) or reboot; have it serviced if it returns' if fatal
               else 'look at the application that ran then; see %s' % XID_CATALOGUE)
        problems.append('Xid %d (%s) x%d on %s: %s; last: %s'
                        % (code, entry['meaning'], entry['count'], ', '.join(entry['gpus']), fix, entry['last']))
    value = {'events': len(events), 'by_code': groups}
    if not events:
        return result(OK, value, 'no Xid in the kernel log')
    status = worst(statuses)
    summary = '%s in the kernel log: %s' % (_plural(len(events), 'Xid event'),
                                            ', '.join('Xid %d x%d' % (g['code'], g['count']) for g in groups))
    hint = ('a fatal Xid: drain and reset the GPU before serving; see %s' % XID_CATALOGUE if status == FAIL
            else 'application-level Xids: see %s' % XID_CATALOGUE)
    return result(status, value, summary, problems, hint)


# PCIe

def _acs_redirects(acs_ctl):
    return [bit for bit in ACS_REDIRECT_BITS if acs_ctl and acs_ctl.get(bit)]


def check_pcie(smi, bridges_acs, iommu):
    """Link width and generation per GPU, ACS on the bridges above the GPUs, IOMMU mode.

    bridges_acs: {gpu bus id: [{'bdf', 'acs_ctl'}]} (None: not examined); iommu: iommu_mode() or None.
    Everything here warns except a narrow link: whether ACS actually blocks peer-to-peer is the
    p2p check's finding."""
    if not smi:
        return result(SKIPPED, {'gpus': {}, 'acs': {}, 'iommu': iommu}, 'no GPU in nvidia-smi -q')
    found = []
    links = {}
    for n, info in enumerate(smi):
        pcie = info['pcie']
        label = 'GPU %d (%s)' % (n, info['bus_id'])
        idle = 'Idle' in info['clock_events_active']
        entry = {'gen': pcie['gen_current'], 'gen_max': pcie['gen_max'], 'width': pcie['width_current'],
                 'width_max': pcie['width_max'], 'idle': idle, 'replays': info['replays'], 'note': ''}
        if None not in (pcie['width_current'], pcie['width_max']) and pcie['width_current'] < pcie['width_max']:
            found.append((FAIL, '%s link x%d of x%d: reseat the card or check the slot'
                          % (label, pcie['width_current'], pcie['width_max'])))
        if None not in (pcie['gen_current'], pcie['gen_max']) and pcie['gen_current'] < pcie['gen_max']:
            if idle:
                # The link trains down to save power when the GPU idles, and back up under load.
                entry['note'] = 'gen %d of %d while idle (trains up under load)' % (
                    pcie['gen_current'], pcie['gen_max'])
            else:
                found.append((WARN, '%s link gen %d of gen %d while busy: check the slot, riser and BIOS PCIe '
                              'speed setting' % (label, pcie['gen_current'], pcie['gen_max'])))
        links[info['bus_id']] = entry

    acs = {}
    for gpu_bus, bridges in sorted((bridges_acs or {}).items()):
        for bridge in bridges or []:
            bits = _acs_redirects(bridge['acs_ctl'])
            entry = acs.setdefault(bridge['bdf'], {'acs_ctl': bridge['acs_ctl'], 'redirects': bits, 'gpus': []})
            entry['gpus'].append(gpu_bus)
    for bdf, entry in sorted(acs.items()):
        if entry['redirects']:
            found.append((WARN, 'bridge %s above GPU %s has ACS %s: %s'
                          % (bdf, ', '.join(entry['gpus']), ' '.join(b + '+' for b in entry['redirects']),
                             ACS_HINT)))

    if iommu and iommu.get('mode') == 'translated':
        found.append((WARN, 'IOMMU translates device DMA (%s): %s' % (iommu.get('evidence', ''), IOMMU_HINT)))

    status = worst(s for s, dummy in found)
    hints = []
    if any(' link x' in problem for dummy, problem in found):
        hints.append('reseat the GPUs with a narrow link or move them to a full-width slot')
    if any(' link gen ' in problem for dummy, problem in found):
        hints.append('a link below its generation under load: check the slot, riser and BIOS PCIe speed setting')
    if any(problem.startswith('bridge ') for dummy, problem in found):
        hints.append(ACS_HINT)
    if iommu and iommu.get('mode') == 'translated':
        hints.append(IOMMU_HINT)
    widths = sorted(set('x%s gen %s' % (e['width'], e['gen']) for e in links.values()))
    summary = '%s: %s; %s with ACS redirect; IOMMU %s' % (
        _plural(len(smi), 'GPU'), ', '.join(widths), _plural(sum(1 for e in acs.values() if e['redirects']), 'bridge'),
        iommu['mode'] if iommu else 'not examined')
    return result(status, {'gpus': links, 'acs': acs, 'iommu': iommu}, summary,
                  [problem for dummy, problem in found], '; '.join(hints))


def check_p2p(matrix, count):
    """Every GPU pair of `topo -p2p r` reads OK. matrix: parse_topo_p2p()."""
    if count < 2:
        return result(SKIPPED, {'pairs': 0, 'blocked': []}, 'fewer than 2 GPUs: no peer-to-peer to check')
    blocked = []
    for i in range(count):
        for j in range(count):
            if i != j and matrix.get((i, j)) != 'OK':
                blocked.append([i, j, matrix.get((i, j), 'missing')])
    pairs = count * (count - 1)
    value = {'pairs': pairs, 'blocked': blocked}
    if not blocked:
        return result(OK, value, 'peer-to-peer read OK between all %d GPU pairs' % (pairs // 2))
    problems = []
    seen = set()
    for i, j, code in blocked:
        back = matrix.get((j, i), 'missing')
        if (j, i) in seen:
            continue
        seen.add((i, j))
        codes = code if back == code else '%s, back %s' % (code, back)
        problems.append('GPU %d <-> GPU %d peer-to-peer read %s: %s' % (i, j, codes, P2P_HINT))
    return result(FAIL, value, '%s of %d blocked' % (_plural(len(problems), 'GPU pair'), pairs // 2), problems,
                  P2P_HINT)


# GPU memory held by others (moved from sglang_preflight.check_gpu_clean)

def _one_line(text, limit=CMDLINE_MAX):
    text = ' '.join((text or '').split())
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _process_label(process):
    # A process of another PID namespace (a container) has no /proc entry here; the driver's name remains.
    command = _one_line(process.get('cmdline')) or ', '.join(filter(None, [process['name'],
                                                                           'command line not visible']))
    user = ', user %s' % process['user'] if process.get('user') else ''
    return 'PID %d (%s%s)' % (process['pid'], command, user)


def _gpu_label(process):
    return 'GPU %d' % process['gpu_index'] if process['gpu_index'] is not None else 'GPU %s' % process['gpu_uuid']


def _own_entry(process):
    return {'pid': process['pid'], 'gpu_index': process['gpu_index'], 'used_memory_mib': process['used_memory_mib'],
            'command': _one_line(process.get('cmdline')) or process['name'], 'by': process.get('own_by') or ''}


def _own_phrase(own):
    """'2 processes of the server's own (unit sglang-server.service) hold 6156 MiB'; '' without any."""
    if not own:
        return ''
    pids = sorted(set(entry['pid'] for entry in own))
    by = sorted(set(entry['by'] for entry in own if entry['by']))
    known = [entry['used_memory_mib'] for entry in own if entry['used_memory_mib'] is not None]
    unknown = len(own) - len(known)
    if not known:
        memory = 'GPU memory (amount not reported)'
    else:
        memory = '%d MiB' % sum(known) + (' (the amount of %d not reported)' % unknown if unknown else '')
    one = len(pids) == 1
    source = ' (%s)' % ', '.join(by) if by else ''
    return '%d process%s of the server\'s own%s %s %s' % (
        len(pids), '' if one else 'es', source, 'holds' if one else 'hold', memory)


def check_gpu_clean(gpus, processes, used_indices, threshold_mib, own_pids=(), fix='stop it or free the GPU',
                    threshold_fix='free the GPU or raise the memory threshold', own_errors=()):
    """No foreign compute process and at most threshold_mib MiB not held by own processes on the GPUs
    in used_indices. processes: gpu_info processes with 'cmdline', 'user' and 'own' added, and
    'own_by' (what makes it the server's: 'unit sglang-server.service') where known; a pid in
    own_pids counts as own too. own_errors: the lookups of the server's processes that failed,
    named in each foreign process's problem (it may be the server's). fix / threshold_fix end the
    two kinds of problem.

    value: 'gpus' (looked at), 'foreign' (PIDs, one per GPU they hold), 'own' (one entry per own
    process and GPU: pid, gpu_index, used_memory_mib, command, by), 'own_errors', 'threshold_mib'.
    """
    if not gpus:
        return result(SKIPPED, {'gpus': [], 'foreign': [], 'own': [], 'own_errors': list(own_errors),
                                'threshold_mib': threshold_mib}, 'no GPU reported')
    own_pids = set(own_pids or ())
    used = sorted(used_indices)

    def own(process):
        return bool(process.get('own')) or process['pid'] in own_pids

    caveat = (' (not told from the server\'s own processes: %s)' % '; '.join(own_errors)) if own_errors else ''
    problems = []
    foreign_gpus = set()
    foreign = []
    own_found = []
    # A process on a GPU the facts do not index (a MIG instance) may be on one of ours.
    for process in processes:
        if process['gpu_index'] not in used + [None]:
            continue
        if own(process):
            own_found.append(_own_entry(process))
            continue
        foreign_gpus.add(process['gpu_index'])
        foreign.append(process['pid'])
        memory = process['used_memory_mib']
        holds = 'holds %d MiB' % memory if memory is not None else 'holds GPU memory (amount not reported)'
        problems.append('%s is in use by a foreign process: %s %s%s; %s'
                        % (_gpu_label(process), _process_label(process), holds, caveat, fix))
    held_elsewhere = []
    for gpu in sorted(gpus, key=lambda gpu: gpu['index']):
        if gpu['index'] not in used or gpu['index'] in foreign_gpus or gpu['memory_used_mib'] is None:
            continue
        held = [p['used_memory_mib'] for p in processes if own(p) and p['gpu_index'] == gpu['index']]
        if None in held:
            continue  # the server holds an unknown part of it
        rest = gpu['memory_used_mib'] - sum(held)
        if rest > threshold_mib:
            held_elsewhere.append(gpu['index'])
            beyond = ' beyond the server\'s own %d MiB' % sum(held) if held else ''
            problems.append('GPU %d has %d MiB in use%s (threshold %d MiB) that no listed process holds (an orphan '
                            'or a process in another PID namespace); %s'
                            % (gpu['index'], rest, beyond, threshold_mib, threshold_fix))
    value = {'gpus': used, 'foreign': foreign, 'own': own_found, 'own_errors': list(own_errors),
             'threshold_mib': threshold_mib}
    own_phrase = _own_phrase(own_found)
    if problems:
        unclean = sorted(set(held_elsewhere) | set(i for i in foreign_gpus if i is not None))
        named = ('GPU %d' % unclean[0] if len(unclean) == 1 else 'GPUs %s' % ', '.join(str(i) for i in unclean)
                 ) if unclean else 'a GPU'
        pids = sorted(set(foreign))
        summary = '%s of %d not clean' % (named, len(used))
        if pids:
            summary += ': foreign %s %s' % ('PID' if len(pids) == 1 else 'PIDs', ', '.join(str(p) for p in pids))
        if own_phrase:
            summary += '; %s' % own_phrase
        return result(FAIL, value, summary, problems, fix)
    gpus_named = 'GPU %d' % used[0] if len(used) == 1 else 'GPUs %s' % ', '.join(str(i) for i in used)
    if own_phrase:
        return result(OK, value, '%s: no foreign compute process; %s, at most %d MiB in use besides the server'
                      % (gpus_named, own_phrase, threshold_mib))
    return result(OK, value, '%s: no foreign compute process, at most %d MiB in use besides the server'
                  % (gpus_named, threshold_mib))
