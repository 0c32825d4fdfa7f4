# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is this node fit to serve: collect what each check needs from the host and run the checks.

What is read from the host (commands, sysfs, /proc, the NCCL smoke run) goes through Host, so the
tests replay recorded outputs. Each check's result is the dict gpu_health_checks.result() builds;
a check that cannot read its input reports that instead of failing the whole assessment.
"""

from __future__ import annotations

import errno
import os
import pwd

from ansible_collections.inferops.gpu.plugins.module_utils.gpu import health_checks as checks
from ansible_collections.inferops.gpu.plugins.module_utils.gpu import health_parse as parse
from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs
from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout

CHECKS = ('driver', 'gpus', 'xid', 'pcie', 'p2p', 'gpu_clean', 'nccl')
DEFAULT_CHECKS = CHECKS[:-1]  # the NCCL smoke test takes GPUs and seconds: opt-in
SYSFS_PCI = '/sys/bus/pci/devices'
CGROUP_ROOT = '/sys/fs/cgroup'
# What `systemctl show` is asked for: enough to find a unit's processes.
UNIT_PROPERTIES = ('LoadState', 'ActiveState', 'MainPID', 'ControlGroup')
IOMMU_GROUPS = '/sys/kernel/iommu_groups'
CLEAN_FIX = 'stop it or free the GPU before serving'
MEMORY_FIX = 'free the GPU or raise gpu_memory_threshold_mib'


class Unavailable(Exception):
    """An input of a check could not be read; the text says what and why."""


def _text(value):
    return value.decode('utf-8', 'replace') if isinstance(value, bytes) else value


class Host:
    """The host as the checks see it. run_command is bounded (bounded_run), find_binary as
    AnsibleModule.get_bin_path, gpu_facts() as gpu_facts.collect_gpu_facts, smoke(**kwargs) as
    nccl_smoke.run_smoke. proc and cgroup_root: where /proc and the cgroup tree are read."""

    def __init__(self, run_command, find_binary, gpu_facts, smoke, nvidia_smi='nvidia-smi', proc=procfs.PROC,
                 cgroup_root=None):
        self.run_command = run_command
        self.find_binary = find_binary
        self.gpu_facts = gpu_facts
        self.smoke = smoke
        self.nvidia_smi = nvidia_smi
        self.proc = proc
        self.cgroup_root = cgroup_root or CGROUP_ROOT

    def command(self, name, *args):
        path = self.find_binary(name)
        if not path:
            raise Unavailable('%s is not installed' % name)
        argv = [path] + list(args)
        rc, out, err = self.run_command(argv)
        if rc != 0:
            detail = ' '.join((_text(out) + ' ' + _text(err)).split()) or 'no output'
            raise Unavailable('`%s` exited with code %s: %s' % (' '.join(argv), rc, detail[:300]))
        return _text(out)

    def smi(self, *args):
        return self.command(self.nvidia_smi, *args)

    def kernel_log(self):
        """(source, text): this boot's kernel messages from the journal, else the ring buffer."""
        try:
            return 'journalctl -k -b', self.command('journalctl', '-k', '-b', '--no-pager', '-q', '-o', 'short-monotonic')
        except Unavailable as journal:
            try:
                return 'dmesg', self.command('dmesg')
            except Unavailable as ring:
                raise Unavailable('%s; %s' % (journal, ring))

    def lspci(self):
        """`lspci -vvv`, or None without pciutils (the config space is read instead)."""
        if not self.find_binary('lspci'):
            return None
        return self.command('lspci', '-vvv')

    @staticmethod
    def read_bytes(path):
        with open(path, 'rb') as handle:
            return handle.read()

    @staticmethod
    def read_text(path):
        with open(path) as handle:
            return handle.read()

    @staticmethod
    def realpath(path):
        return os.path.realpath(path)

    @staticmethod
    def iommu_group_count():
        try:
            return len(os.listdir(IOMMU_GROUPS))
        except OSError:
            return 0

    def cmdline(self, pid):
        return procfs.cmdline(pid, self.proc)

    def process_table(self):
        return procfs.process_table(self.proc)

    def unit_properties(self, unit):
        """The unit's UNIT_PROPERTIES from `systemctl show` (read-only, through the bounded runner)."""
        text = self.command('systemctl', 'show', unit, '--property=' + ','.join(UNIT_PROPERTIES))
        props = {}
        for line in text.splitlines():
            key, sep, value = line.partition('=')
            if sep:
                props[key.strip()] = value.strip()
        return props

    def cgroup_pids(self, control_group):
        """The PIDs in a control group and the groups below it, as systemd names it (ControlGroup=):
        under the unified hierarchy (cgroup v2), else systemd's own v1 hierarchy (name=systemd) or
        the hybrid layout's unified one. cgroup.procs, or v1's tasks where it is missing."""
        if not control_group or not control_group.startswith('/'):
            return []
        for root in (self.cgroup_root, os.path.join(self.cgroup_root, 'systemd'),
                     os.path.join(self.cgroup_root, 'unified')):
            top = root.rstrip('/') + control_group
            if not os.path.isdir(top):
                continue
            pids = set()
            for dirpath, dummy, files in os.walk(top):
                name = 'cgroup.procs' if 'cgroup.procs' in files else 'tasks' if 'tasks' in files else None
                if name is None:
                    continue
                try:
                    pids.update(int(field) for field in self.read_text(os.path.join(dirpath, name)).split())
                except (OSError, ValueError):
                    continue  # the group went away while walking
            if pids:
                return sorted(pids)
        return []

    def user(self, pid):
        try:
            uid = os.stat(os.path.join(self.proc, str(pid))).st_uid
        except OSError:
            return ''
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return str(uid)


def unavailable(what, exc):
    return checks.result('warn', None, '%s could not be read' % what, [], '%s: %s' % (what, exc))


class Assessment:
    """One run over one host. options: the module's parameters (see plugins/modules/gpu_health.py)."""

    def __init__(self, options, host):
        self.options = options
        self.host = host
        self.facts = None
        self._smi_q = None

    # inputs shared by several checks

    def smi_q(self):
        if self._smi_q is None:
            self._smi_q = parse.parse_smi_q(self.host.smi('-q'))
        return self._smi_q

    def smi_q_or_empty(self):
        try:
            return self.smi_q(), None
        except (Unavailable, ValueError) as exc:
            return [], 'nvidia-smi -q: %s' % exc

    def count(self):
        return self.facts['count']

    # the checks

    def driver(self):
        facts = self.facts
        driver = facts['driver_version'] if facts['backend'] != 'none' else ''
        outcome = checks.check_driver(driver, facts['cuda_driver_version'], self.options.get('toolkit_version') or '',
                                      self.options.get('min_driver_version') or '')
        if not driver and facts['reason']:
            outcome['value'] = dict(outcome['value'] or {}, reason=facts['reason'])
        return outcome

    def gpus(self):
        smi, error = self.smi_q_or_empty() if self.count() else ([], None)
        outcome = checks.check_gpus(self.facts['gpus'], smi, self.options.get('expected_gpus') or None,
                                    self.options.get('compute_capabilities') or [])
        return self._noted(outcome, error)

    def xid(self):
        try:
            source, text = self.host.kernel_log()
        except Unavailable as exc:
            return unavailable('the kernel log', '%s; run as root to read it' % exc)
        outcome = checks.check_xid(parse.parse_xid(text))
        outcome['value'] = dict(outcome['value'], source=source)
        return outcome

    def pcie(self):
        if not self.count():
            return checks.result('skipped', None, 'no GPU')
        smi, error = self.smi_q_or_empty()
        bridges = {}
        lspci = None
        try:
            lspci = self.host.lspci()
        except Unavailable as exc:
            error = '; '.join(filter(None, [error, str(exc)]))
        acs_by_bdf = parse.parse_lspci_acs(lspci) if lspci is not None else {}
        for gpu in self.facts['gpus']:
            bdf = parse.normalize_bdf(gpu['pci_bus_id'])
            try:
                above = parse.bridges_above(self.host.realpath(os.path.join(SYSFS_PCI, bdf)))
            except ValueError:
                above = []  # no sysfs entry (a container): nothing above to examine
            # The root port (first) is left out: traffic between root ports crosses the root complex
            # anyway, and most platforms enable ACS there; the switch ports below it are what matter.
            bridges[gpu['pci_bus_id']] = [{'bdf': bridge, 'acs_ctl': self._acs(bridge, lspci, acs_by_bdf)}
                                          for bridge in above[1:]]
        cmdline = ''
        try:
            cmdline = self.host.read_text('/proc/cmdline')
        except OSError:
            pass
        iommu = parse.iommu_mode(cmdline, self.host.iommu_group_count())
        return self._noted(checks.check_pcie(smi, bridges, iommu), error)

    def _acs(self, bdf, lspci, acs_by_bdf):
        if lspci is not None:
            return (acs_by_bdf.get(bdf) or {}).get('acs_ctl')
        try:
            return parse.acs_from_config(self.host.read_bytes(os.path.join(SYSFS_PCI, bdf, 'config')))
        except (OSError, ValueError):
            return None  # not root: the extended config space reads short

    def p2p(self):
        if self.count() < 2:
            return checks.check_p2p({}, self.count())
        try:
            matrix = parse.parse_topo_p2p(self.host.smi('topo', '-p2p', 'r'))
        except (Unavailable, ValueError) as exc:
            return unavailable('the P2P matrix', exc)
        return checks.check_p2p(matrix, self.count())

    def gpu_clean(self):
        if not self.count():
            return checks.result('skipped', None, 'no GPU')
        owners, errors = self.own_processes()
        processes = []
        for process in self.facts['processes']:
            pid = process['pid']
            entry = dict(process, cmdline=self.host.cmdline(pid), user=self.host.user(pid), own=pid in owners)
            if pid in owners:
                entry['own_by'] = owners[pid]
            processes.append(entry)
        indices = sorted(gpu['index'] for gpu in self.facts['gpus'])
        used = self.options.get('gpu_indices') or indices
        return checks.check_gpu_clean(self.facts['gpus'], processes, used,
                                      self.options.get('gpu_memory_threshold_mib', 1024), own_errors=errors,
                                      fix=CLEAN_FIX, threshold_fix=MEMORY_FIX)

    # the server's own processes

    def own_processes(self):
        """({pid: what makes it the server's}, [the lookups that failed]).

        The server as the sglang_server role runs it: every process of a systemd unit's control
        group (own_units), or the process group a pid file records with its descendants
        (own_pid_files, the process manager's "PID STARTTIME"); own_pids with their descendants.
        A unit or pid file that names no running server adds nothing; one that cannot be read is
        reported, and the processes it would have named stay foreign.
        """
        owners, errors = {}, []
        cache = {}

        def table():
            if 'table' not in cache:
                cache['table'] = self.host.process_table()
            return cache['table']

        def claim(pids, by):
            for pid in pids:
                owners.setdefault(pid, by)

        for unit in self.options.get('own_units') or []:
            try:
                claim(self.unit_pids(unit, table), 'unit %s' % unit)
            except (Unavailable, CommandTimeout) as exc:
                errors.append('unit %s: %s' % (unit, exc))
        for path in self.options.get('own_pid_files') or []:
            try:
                leader, pids = self.pid_file_pids(path, table)
            except Unavailable as exc:
                errors.append('pid file %s: %s' % (path, exc))
                continue
            claim(pids, 'process group %d of %s' % (leader, path))
        for pid in self.options.get('own_pids') or []:
            claim(procfs.tree(table(), pid) or [pid], 'own_pids')
        return owners, errors

    def unit_pids(self, unit, table):
        """The processes of the unit's control group; the main PID and its descendants where the
        cgroup tree cannot be read. [] for a unit that does not exist or does not run."""
        props = self.host.unit_properties(unit)
        if props.get('LoadState') == 'not-found':
            return []
        pids = self.host.cgroup_pids(props.get('ControlGroup') or '')
        try:
            main = int(props.get('MainPID') or 0)
        except ValueError:
            main = 0
        if not pids and main:
            pids = procfs.tree(table(), main) or [main]
        return pids

    def pid_file_pids(self, path, table):
        """(leader, pids) of the server a process manager's pid file records: the leader's process
        group (its orphans too, after the leader died) and the leader's descendants; nothing when
        the PID runs another program now (another start time). (0, []) without the file: nothing
        was started there."""
        try:
            text = self.host.read_text(path)
        except OSError as exc:
            if getattr(exc, 'errno', None) == errno.ENOENT:
                return 0, []
            raise Unavailable('cannot be read: %s' % (exc.strerror or exc))
        fields = text.split()
        try:
            leader = int(fields[0])
            starttime = int(fields[1]) if len(fields) > 1 else None
        except (IndexError, ValueError):
            raise Unavailable('does not hold "PID STARTTIME": %r' % text[:80])
        processes = table()
        entry = processes.get(leader)
        if entry is not None and starttime is not None and entry.starttime != starttime:
            # The PID went to another process: the kernel reuses no PID while a group of that ID
            # lives, so the server left nothing behind.
            return leader, []
        members = set(procfs.group(processes, leader))
        if entry is not None:
            members.update(procfs.tree(processes, leader))
        return leader, sorted(pid for pid in members if processes[pid].state not in ('Z', 'X', 'x'))

    def nccl(self):
        python = self.options.get('ml_env_python')
        if not self.count():
            return checks.result('skipped', None, 'no GPU')
        if not python:
            return checks.result('fail', None, 'no ml-env python given', ['the NCCL smoke test needs ml_env_python'],
                                 'set ml_env_python to the ml-env release python (the ml_env role publishes it)')
        world = self.options.get('nccl_gpus') or self.count()
        return self.host.smoke(python=python, world_size=world, deadline_s=self.options.get('nccl_timeout', 60),
                               size_bytes=self.options.get('nccl_size_mib', 64) * 1024 * 1024,
                               iters=self.options.get('nccl_iters', 20))

    @staticmethod
    def _noted(outcome, error):
        """A check that ran on part of its input says which part was missing."""
        if error:
            outcome['summary'] = '%s (%s)' % (outcome['summary'], error)
            if outcome['status'] == 'ok':
                outcome['status'] = 'warn'
                outcome['hint'] = error
        return outcome

    def run(self):
        selected = [name for name in CHECKS if name in (self.options.get('checks') or DEFAULT_CHECKS)]
        results = {}
        try:
            self.facts = self.host.gpu_facts()
        except CommandTimeout as exc:
            message = '%s; a GPU that fell off the bus makes nvidia-smi hang: look for Xid 79 in the kernel log' % exc
            self.facts = None
            hung = checks.result('fail', None, 'nvidia-smi hung', [message], 'look for Xid 79 in the kernel log')
            results = dict((name, hung if name == 'driver' else checks.result('skipped', None, 'GPU facts unavailable'))
                           for name in selected if name != 'xid')
            if 'xid' in selected:
                results['xid'] = self.xid()
            return compose(results, self.options, None)
        for name in selected:
            try:
                results[name] = getattr(self, name)()
            except CommandTimeout as exc:
                results[name] = checks.result('fail', None, '%s timed out' % name, [str(exc)],
                                              'a hung nvidia-smi or kernel: look for Xid 79 in the kernel log')
        return compose(results, self.options, self.facts)


def compose(results, options, facts):
    require = set(options.get('require') if options.get('require') is not None else CHECKS)
    problems, advisories = [], []
    for name in CHECKS:
        if name not in results:
            continue
        outcome = results[name]
        lines = outcome['problems'] or ([outcome['summary']] if outcome['status'] in ('fail', 'warn') else [])
        if not outcome['problems'] and outcome['hint']:
            lines = ['%s (%s)' % (line, outcome['hint']) for line in lines]
        lines = ['%s: %s' % (name, line) for line in lines]
        if outcome['status'] == 'fail' and name in require:
            problems.extend(lines)
        elif outcome['status'] in ('fail', 'warn'):
            advisories.extend(lines)
    return {
        'healthy': not problems,
        'problems': problems,
        'advisories': advisories,
        'checks': results,
        'count': facts['count'] if facts else 0,
        'driver_version': facts.get('driver_version', '') if facts else '',
        # The NCCL the smoke test's ranks loaded, beside the driver: the two versions a TP>1 failure asks for.
        'nccl_version': ((results.get('nccl') or {}).get('value') or {}).get('nccl_version') or '',
    }


def failure_message(problems):
    if len(problems) == 1:
        return 'node not fit to serve: %s' % problems[0]
    return 'node not fit to serve, %d problems: %s' % (
        len(problems), ' '.join('(%d) %s' % (i, problem) for i, problem in enumerate(problems, 1)))
