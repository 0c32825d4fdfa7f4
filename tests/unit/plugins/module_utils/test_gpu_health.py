# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The assessment over recorded hosts: the real 2x H200 captures and the composed 8x RTX PRO 6000."""

from __future__ import annotations

import os

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.gpu import health as gpu_health
from ansible_collections.inferops.gpu.plugins.module_utils.gpu import health_checks as gpu_health_checks
from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.facts import empty_facts
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.nvidia_smi import parse_query_apps, parse_query_gpu

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, '..', '..', 'fixtures')
RTX_SWITCH_PORTS = {'16': '15:00.0', '1a': '15:01.0', '38': '15:02.0', '3c': '15:03.0',
                    '9a': '99:00.0', 'ab': '99:01.0', 'b8': '99:02.0', 'bc': '99:03.0'}


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


def facts_of(system):
    gpus = parse_query_gpu(fixture('nvidia_smi', system, 'query_gpu.csv'))
    driver = gpus[0].pop('driver_version')
    for gpu in gpus[1:]:
        gpu.pop('driver_version')
    processes = parse_query_apps(fixture('nvidia_smi', system, 'query_apps.csv'),
                                 dict((g['uuid'], g['index']) for g in gpus))
    return {'backend': 'nvidia-smi', 'count': len(gpus), 'reason': '', 'driver_version': driver,
            'cuda_driver_version': '13.0', 'gpus': gpus, 'processes': processes}


class FakeHost(gpu_health.Host):
    """A recorded host: outputs by command, sysfs paths, files; records what was run."""

    def __init__(self, facts, outputs, paths=None, files=None, groups=0, installed=('nvidia-smi', 'dmesg'),
                 smoke=None):
        super().__init__(self._run, self._find, lambda: facts, smoke or self._no_smoke)
        self.outputs = outputs
        self.paths = paths or {}
        self.files = files or {}
        self.groups = groups
        self.installed = installed
        self.ran = []

    def _find(self, name):
        return '/usr/bin/' + name if name in self.installed else None

    def _run(self, argv):
        self.ran.append(argv[1:])
        key = ' '.join([os.path.basename(argv[0])] + argv[1:])
        output = self.outputs[key]
        if isinstance(output, Exception):
            raise output
        return output if isinstance(output, tuple) else (0, output, '')

    @staticmethod
    def _no_smoke(**kwargs):
        raise AssertionError('the smoke test ran without being asked for')

    def realpath(self, path):
        return self.paths.get(path, path)

    def read_text(self, path):
        if path not in self.files:
            raise OSError('no such file: %s' % path)
        return self.files[path]

    def read_bytes(self, path):
        raise OSError('no config space here')

    def iommu_group_count(self):
        return self.groups

    def cmdline(self, pid):
        return 'python3 -m sglang.launch_server --tp 8' if pid == 48213 else ''

    def user(self, pid):
        return 'sglang'


def h200_host(**kwargs):
    outputs = {
        'nvidia-smi -q': fixture('gpu_health', 'h200x2_nvlink', 'smi_q.txt'),
        'nvidia-smi topo -p2p r': fixture('gpu_health', 'h200x2_nvlink', 'topo_p2p_r.txt'),
        'dmesg': fixture('gpu_health', 'h200x2_nvlink', 'dmesg.txt'),
    }
    outputs.update(kwargs.pop('outputs', {}))
    facts = facts_of('h200x2_nvlink')
    facts['processes'] = []
    facts['gpus'] = [dict(gpu, memory_used_mib=0) for gpu in facts['gpus']]
    return FakeHost(facts, outputs, files={'/proc/cmdline': fixture('gpu_health', 'h200x2_nvlink', 'cmdline.txt')},
                    **kwargs)


def rtx_host(lspci='lspci_acs_off.txt', topo='topo_p2p_r.txt', smi='smi_q.txt', cmdline='cmdline.txt', **kwargs):
    outputs = {
        'nvidia-smi -q': fixture('gpu_health', 'rtxpro6000x8_pcie', smi),
        'nvidia-smi topo -p2p r': fixture('gpu_health', 'rtxpro6000x8_pcie', topo),
        'journalctl -k -b --no-pager -q -o short-monotonic': '',
        'lspci -vvv': fixture('gpu_health', 'rtxpro6000x8_pcie', lspci),
    }
    paths = {}
    for gpu, port in RTX_SWITCH_PORTS.items():
        root = '13' if port.startswith('15') else '97'
        upstream = '14' if root == '13' else '98'
        paths['/sys/bus/pci/devices/0000:%s:00.0' % gpu] = (
            '/sys/devices/pci0000:%s/0000:%s:01.0/0000:%s:00.0/0000:%s/0000:%s:00.0' % (root, root, upstream, port, gpu))
    return FakeHost(facts_of('rtxpro6000x8_pcie'), outputs, paths=paths,
                    files={'/proc/cmdline': fixture('gpu_health', 'rtxpro6000x8_pcie', cmdline)}, groups=112,
                    installed=('nvidia-smi', 'journalctl', 'lspci'), **kwargs)


def assess(host, **options):
    return gpu_health.Assessment(options, host).run()


def test_the_real_h200_host_is_fit():
    result = assess(h200_host(), expected_gpus=2, compute_capabilities=['9.0'], toolkit_version='13.0',
                    min_driver_version='580.65.06')
    assert result['healthy'] is True and result['problems'] == [] and result['count'] == 2
    statuses = dict((name, check['status']) for name, check in result['checks'].items())
    assert statuses == {'driver': 'ok', 'gpus': 'ok', 'xid': 'ok', 'pcie': 'ok', 'p2p': 'ok', 'gpu_clean': 'ok'}
    assert result['checks']['xid']['value']['source'] == 'dmesg'  # no journal on that host
    assert result['checks']['pcie']['value']['iommu']['mode'] == 'off'
    assert result['driver_version'] == '580.159.04'


def test_nccl_is_opt_in_and_runs_with_the_ml_env_python_over_every_gpu():
    calls = []

    def smoke(**kwargs):
        calls.append(kwargs)
        return gpu_health_checks.result('ok', {'seconds': 2.5, 'busbw_gbps': 300.0}, 'all-reduce over 2 GPUs')

    assert 'nccl' not in assess(h200_host(smoke=smoke))['checks']
    result = assess(h200_host(smoke=smoke), checks=['nccl'], ml_env_python='/opt/ml-env/current/bin/python',
                    nccl_timeout=45)
    assert result['checks']['nccl']['status'] == 'ok'
    assert calls == [{'python': '/opt/ml-env/current/bin/python', 'world_size': 2, 'deadline_s': 45,
                      'size_bytes': 64 << 20, 'iters': 20}]


def test_the_result_names_the_nccl_the_smoke_test_ran():
    def smoke(**kwargs):
        return gpu_health_checks.result('ok', {'seconds': 2.5, 'busbw_gbps': 300.0, 'nccl_version': '2.30.7'},
                                        'NCCL 2.30.7 all-reduce smoke test over 2 GPUs')

    assert assess(h200_host(smoke=smoke), checks=['nccl'], ml_env_python='/p')['nccl_version'] == '2.30.7'
    # No smoke test, or one that never started a rank: nothing to name.
    assert assess(h200_host(smoke=smoke))['nccl_version'] == ''
    no_python = assess(h200_host(smoke=smoke), checks=['nccl'])
    assert no_python['checks']['nccl']['value'] is None and no_python['nccl_version'] == ''


def test_a_failing_smoke_test_is_a_problem_when_required_only():
    def smoke(**kwargs):
        return gpu_health_checks.result('fail', {'outcome': 'hang'}, 'no progress',
                                        ['no progress in 60 s: peer-to-peer blocked?'], 'rerun with NCCL_P2P_DISABLE=1')

    options = dict(checks=['nccl'], ml_env_python='/p')
    failed = assess(h200_host(smoke=smoke), **options)
    assert failed['healthy'] is False
    assert failed['problems'] == ['nccl: no progress in 60 s: peer-to-peer blocked?']
    reported = assess(h200_host(smoke=smoke), require=['driver'], **options)
    assert reported['healthy'] is True and reported['advisories'] == failed['problems']


def test_the_composed_rtx_host_is_fit_with_acs_off_and_iommu_passthrough():
    result = assess(rtx_host(), expected_gpus=8, compute_capabilities=['12.0'], toolkit_version='13.0')
    assert [line.split(':')[0] for line in result['problems']] == ['gpu_clean'] * 8
    assert result['checks']['pcie']['status'] == 'ok', result['checks']['pcie']
    assert result['checks']['pcie']['value']['iommu']['mode'] == 'passthrough'
    assert result['checks']['xid']['value']['source'] == 'journalctl -k -b'
    # The server's processes are foreign unless the caller names them.
    assert result['checks']['gpu_clean']['status'] == 'fail'
    assert 'PID 48213 (python3 -m sglang.launch_server --tp 8, user sglang)' in result['checks']['gpu_clean']['problems'][0]


def test_own_pids_make_the_servers_processes_not_foreign():
    pids = [48213, 48214, 48216, 48219, 48221, 48224, 48226, 48229]
    result = assess(rtx_host(), checks=['gpu_clean'], own_pids=pids)
    assert result['checks']['gpu_clean']['status'] == 'ok'


def test_acs_on_the_switch_ports_and_blocked_p2p_are_named():
    result = assess(rtx_host(lspci='lspci_acs_on.txt', topo='topo_p2p_r_blocked.txt', cmdline='cmdline_translated.txt'),
                    checks=['pcie', 'p2p'])
    pcie, p2p = result['checks']['pcie'], result['checks']['p2p']
    assert pcie['status'] == 'warn' and p2p['status'] == 'fail'
    bridges = sorted(pcie['value']['acs'])
    # Only the switch ports below the root ports are examined.
    assert bridges == ['0000:14:00.0', '0000:15:00.0', '0000:15:01.0', '0000:15:02.0', '0000:15:03.0',
                       '0000:98:00.0', '0000:99:00.0', '0000:99:01.0', '0000:99:02.0', '0000:99:03.0']
    assert any('bridge 0000:15:00.0' in line and 'ACS' in line for line in result['advisories'])
    assert any('IOMMU' in line and 'iommu=pt' in line for line in result['advisories'])
    assert result['healthy'] is False and all(line.startswith('p2p: GPU ') for line in result['problems'])


def test_gpu_problems_fail_the_gpus_and_pcie_checks():
    result = assess(rtx_host(smi='smi_q_problems.txt'), checks=['gpus', 'pcie'])
    assert result['checks']['gpus']['status'] == 'fail'
    assert result['checks']['pcie']['status'] == 'fail'
    assert any('x8 of x16' in line for line in result['problems'])


def test_a_host_without_a_driver_reports_count_zero_and_require_decides():
    host = FakeHost(empty_facts('nvidia-smi: not found'), {'dmesg': ''})
    reported = assess(host, require=[])
    assert reported['healthy'] is True and reported['count'] == 0
    checks = reported['checks']
    assert checks['driver']['status'] == 'fail' and checks['driver']['value']['reason'] == 'nvidia-smi: not found'
    assert checks['gpus']['status'] == 'ok'
    assert [checks[name]['status'] for name in ('pcie', 'p2p', 'gpu_clean')] == ['skipped'] * 3
    required = assess(FakeHost(empty_facts('x'), {'dmesg': ''}), require=['driver', 'gpus'], expected_gpus=8)
    assert required['healthy'] is False
    assert [line.split(':')[0] for line in required['problems']] == ['driver', 'gpus']
    assert gpu_health.failure_message(required['problems']).startswith('node not fit to serve, 2 problems: (1) driver')


def test_an_old_driver_fails_the_driver_check():
    host = h200_host()
    facts = host.gpu_facts()
    facts.update(driver_version='570.124.06', cuda_driver_version='12.8')
    result = assess(host, checks=['driver'], toolkit_version='13.0', min_driver_version='580.65.06')
    assert result['healthy'] is False
    assert 'supports CUDA 12.8, toolkit is 13.0: install a 580+ driver' in result['problems'][0]


def test_an_unreadable_kernel_log_warns_instead_of_failing():
    host = h200_host(outputs={'dmesg': (1, '', 'dmesg: read kernel buffer failed: Operation not permitted')})
    result = assess(host, checks=['xid'])
    assert result['healthy'] is True and result['checks']['xid']['status'] == 'warn'
    assert 'Operation not permitted' in result['advisories'][0] and 'run as root' in result['advisories'][0]


def test_a_hung_nvidia_smi_fails_the_driver_and_still_reads_the_kernel_log():
    host = h200_host()

    def hung():
        raise CommandTimeout(['nvidia-smi', '--query-gpu'], 30, 'command_timeout')

    host.gpu_facts = hung
    result = assess(host)
    assert result['checks']['driver']['status'] == 'fail' and 'Xid 79' in result['problems'][0]
    assert result['checks']['xid']['status'] == 'ok'
    assert result['checks']['p2p']['status'] == 'skipped'


def test_the_nccl_check_without_python_fails_clearly():
    result = assess(h200_host(), checks=['nccl'])
    assert result['checks']['nccl']['status'] == 'fail' and 'ml_env_python' in result['problems'][0]


@pytest.mark.parametrize('bus_id, sysfs', [('00000000:3B:00.0', '0000:3b:00.0'), ('00000001:C1:00.0', '0001:c1:00.0')])
def test_bus_ids_are_named_as_sysfs_names_them(bus_id, sysfs):
    from ansible_collections.inferops.gpu.plugins.module_utils.gpu.health_parse import normalize_bdf
    assert normalize_bdf(bus_id) == sysfs


# The server's own processes on a serving node (issue 29): the ranks of the collection's own server are
# not foreign, whether the server runs as a systemd unit (its control group) or as a process group (the
# process manager's pid file); any other process still fails the check.

SERVING = ('gpu_health', 'rtxpro6000x8_serving')
UNIT = 'sglang-server.service'
SHOW = 'systemctl show %s --property=LoadState,ActiveState,MainPID,ControlGroup' % UNIT
RANKS = [48213, 48214, 48216, 48219, 48221, 48224, 48226, 48229]
FOREIGN = 51377


def serving_ps():
    """{pid: (ppid, pgid, user, argv)} of ps.txt."""
    table = {}
    for line in fixture(*SERVING + ('ps.txt',)).splitlines()[1:]:
        pid, ppid, pgid, user, args = line.split(None, 4)
        table[int(pid)] = (int(ppid), int(pgid), user, args.split())
    return table


class ServingHost(FakeHost):
    """The serving node: /proc written from ps.txt (start time 777 for every process), the unit's
    control group from cgroup.procs, nvidia-smi's processes from query_apps.csv."""

    def __init__(self, tmp_path, outputs=None, ps=None, apps=None, **kwargs):
        facts = facts_of('rtxpro6000x8_pcie')
        gpus_by_uuid = dict((g['uuid'], g['index']) for g in facts['gpus'])
        facts['processes'] = parse_query_apps(apps if apps is not None else fixture(*SERVING + ('query_apps.csv',)),
                                              gpus_by_uuid)
        replies = {SHOW: fixture(*SERVING + ('systemctl_show.txt',))}
        replies.update(outputs or {})
        super().__init__(facts, replies, installed=('nvidia-smi', 'systemctl'), **kwargs)
        self.ps = serving_ps() if ps is None else ps
        self.proc = str(tmp_path / 'proc')
        for pid, (ppid, pgid, user, argv) in self.ps.items():
            directory = tmp_path / 'proc' / str(pid)
            directory.mkdir(parents=True)
            (directory / 'stat').write_text('%d (%s) S %d %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0\n'
                                            % (pid, os.path.basename(argv[0])[:15], ppid, pgid, pgid))
            (directory / 'cmdline').write_bytes(b''.join(arg.encode() + b'\0' for arg in argv))
        self.cgroup_root = str(tmp_path / 'cgroup')
        group = tmp_path / 'cgroup' / 'system.slice' / UNIT
        group.mkdir(parents=True)
        (group / 'cgroup.procs').write_text(fixture(*SERVING + ('cgroup.procs',)))
        self.pid_file = str(tmp_path / 'run' / 'sglang-server.pid')

    def read_text(self, path):
        # The cgroup tree and the pid file are real files under tmp_path.
        if path.startswith(self.cgroup_root) or path == self.pid_file:
            return gpu_health.Host.read_text(path)
        return super().read_text(path)

    def cmdline(self, pid):
        return gpu_health.Host.cmdline(self, pid)

    def user(self, pid):
        return self.ps[pid][2] if pid in self.ps else ''

    def record_pid_file(self, text):
        os.makedirs(os.path.dirname(self.pid_file), exist_ok=True)
        with open(self.pid_file, 'w') as handle:
            handle.write(text)


def without_foreign():
    return ''.join(line + '\n' for line in fixture(*SERVING + ('query_apps.csv',)).splitlines()
                   if ', %d,' % FOREIGN not in line)


def test_the_units_ranks_are_the_servers_own_and_a_process_outside_its_cgroup_fails(tmp_path):
    host = ServingHost(tmp_path)
    result = assess(host, checks=['gpu_clean'], own_units=[UNIT])
    clean = result['checks']['gpu_clean']
    assert clean['status'] == 'fail' and result['healthy'] is False
    # Only the process outside the unit's control group is a problem, named with its PID, user and command.
    assert result['problems'] == [
        'gpu_clean: GPU 3 is in use by a foreign process: PID 51377 (python3 train.py --gpu 3, user alice) holds '
        '2048 MiB; ' + gpu_health.CLEAN_FIX]
    assert clean['value']['foreign'] == [FOREIGN]
    own = clean['value']['own']
    assert [entry['pid'] for entry in own] == RANKS
    assert set(entry['by'] for entry in own) == {'unit sglang-server.service'}
    assert own[3] == {'pid': 48219, 'gpu_index': 3, 'used_memory_mib': None, 'command': 'sglang::scheduler_TP3',
                      'by': 'unit sglang-server.service'}
    # The summary names both: the foreign process and the server's own, with what they hold.
    held = 85914 + 85770 + 85772 + 85768 + 85770 + 85766 + 85770
    assert clean['summary'] == ("GPU 3 of 8 not clean: foreign PID 51377; 8 processes of the server's own "
                                "(unit sglang-server.service) hold %d MiB (the amount of 1 not reported)" % held)
    # systemctl was asked, read-only; nothing else but reading.
    assert host.ran == [['show', UNIT, '--property=LoadState,ActiveState,MainPID,ControlGroup']]


def test_a_serving_node_without_foreign_processes_is_clean_and_says_whose_memory_it_is(tmp_path):
    result = assess(ServingHost(tmp_path, apps=without_foreign()), checks=['gpu_clean'], own_units=[UNIT])
    clean = result['checks']['gpu_clean']
    assert result['healthy'] is True and clean['status'] == 'ok', clean
    assert clean['value']['foreign'] == [] and len(clean['value']['own']) == 8
    assert clean['summary'].startswith("GPUs 0, 1, 2, 3, 4, 5, 6, 7: no foreign compute process; 8 processes of the "
                                       "server's own (unit sglang-server.service) hold ")
    # Without knowing the unit (before issue 29) every rank is "a foreign process".
    before = assess(ServingHost(tmp_path / 'before', apps=without_foreign()), checks=['gpu_clean'])
    assert before['checks']['gpu_clean']['value']['foreign'] == RANKS
    assert 'PID 48213 (sglang::scheduler_TP0, user sglang)' in before['problems'][0]


def test_the_servers_memory_does_not_count_against_the_threshold_but_memory_beyond_it_does(tmp_path):
    host = ServingHost(tmp_path, apps=without_foreign())
    # 86 GiB held on each GPU by its rank, 570 MiB by the driver's context and nobody listed.
    assert assess(host, checks=['gpu_clean'], own_units=[UNIT], gpu_memory_threshold_mib=600)['healthy'] is True
    host.gpu_facts()['gpus'][0]['memory_used_mib'] += 3000  # 570 MiB of the driver's + 3000 nobody holds
    result = assess(host, checks=['gpu_clean'], own_units=[UNIT])
    assert result['problems'] == [
        "gpu_clean: GPU 0 has 3570 MiB in use beyond the server's own 85914 MiB (threshold 1024 MiB) that no listed "
        "process holds (an orphan or a process in another PID namespace); " + gpu_health.MEMORY_FIX]


def test_a_rank_left_by_its_launcher_is_still_the_units_while_in_its_cgroup(tmp_path):
    ps = serving_ps()
    del ps[48200]  # the launcher died; its ranks were reparented to init, still in the unit's control group
    for pid in RANKS:
        ppid, pgid, user, argv = ps[pid]
        ps[pid] = (1, pgid, user, argv)
    result = assess(ServingHost(tmp_path, ps=ps, apps=without_foreign()), checks=['gpu_clean'], own_units=[UNIT])
    assert result['checks']['gpu_clean']['status'] == 'ok'


def test_without_a_readable_cgroup_the_units_main_pid_and_its_descendants_are_the_servers(tmp_path):
    host = ServingHost(tmp_path)
    host.cgroup_root = str(tmp_path / 'no-cgroup-tree')
    result = assess(host, checks=['gpu_clean'], own_units=[UNIT])
    own = result['checks']['gpu_clean']['value']['own']
    assert [entry['pid'] for entry in own] == RANKS
    assert result['checks']['gpu_clean']['value']['foreign'] == [FOREIGN]


def test_a_cgroup_v1_host_is_read_through_systemds_hierarchy(tmp_path):
    host = ServingHost(tmp_path, apps=without_foreign())
    v2 = os.path.join(host.cgroup_root, 'system.slice')
    os.makedirs(os.path.join(host.cgroup_root, 'systemd'))
    os.rename(v2, os.path.join(host.cgroup_root, 'systemd', 'system.slice'))
    assert assess(host, checks=['gpu_clean'], own_units=[UNIT])['checks']['gpu_clean']['status'] == 'ok'


def test_a_unit_that_does_not_exist_names_no_process_and_no_error(tmp_path):
    missing = 'MainPID=0\nControlGroup=\nLoadState=not-found\nActiveState=inactive\n'
    result = assess(ServingHost(tmp_path, outputs={SHOW: missing}), checks=['gpu_clean'], own_units=[UNIT])
    clean = result['checks']['gpu_clean']
    assert clean['value']['own'] == [] and clean['value']['own_errors'] == []
    assert sorted(clean['value']['foreign']) == RANKS + [FOREIGN]


@pytest.mark.parametrize('reply, said', [
    ((1, '', "System has not been booted with systemd as init system (PID 1). Can't operate."),
     'System has not been booted with systemd'),
    (CommandTimeout(['systemctl', 'show'], 30, 'command_timeout'), 'did not finish within 30 s'),
], ids=['no_systemd', 'hung_systemctl'])
def test_a_unit_that_cannot_be_looked_up_leaves_its_processes_foreign_and_says_why(tmp_path, reply, said):
    result = assess(ServingHost(tmp_path, outputs={SHOW: reply}), checks=['gpu_clean'], own_units=[UNIT])
    clean = result['checks']['gpu_clean']
    assert clean['status'] == 'fail' and clean['value']['own'] == []
    assert len(clean['value']['own_errors']) == 1 and said in clean['value']['own_errors'][0]
    assert "(not told from the server's own processes: unit sglang-server.service: " in clean['problems'][0]


def test_the_process_managers_group_is_the_servers_own(tmp_path):
    host = ServingHost(tmp_path)
    host.record_pid_file('48200 777\n')
    result = assess(host, checks=['gpu_clean'], own_pid_files=[host.pid_file])
    clean = result['checks']['gpu_clean']
    by = 'process group 48200 of %s' % host.pid_file
    assert [entry['pid'] for entry in clean['value']['own']] == RANKS
    assert set(entry['by'] for entry in clean['value']['own']) == {by}
    assert clean['value']['foreign'] == [FOREIGN]
    assert clean['summary'].startswith("GPU 3 of 8 not clean: foreign PID 51377; 8 processes of the server's own "
                                       "(%s) hold " % by)
    assert host.ran == []  # no systemctl for the process manager


def test_the_process_managers_orphaned_ranks_stay_the_servers_by_their_group(tmp_path):
    ps = serving_ps()
    del ps[48200]
    for pid in RANKS:
        ppid, pgid, user, argv = ps[pid]
        ps[pid] = (1, pgid, user, argv)
    host = ServingHost(tmp_path, ps=ps, apps=without_foreign())
    host.record_pid_file('48200 777\n')
    assert assess(host, checks=['gpu_clean'], own_pid_files=[host.pid_file])['healthy'] is True


def test_a_recycled_pid_or_no_pid_file_names_no_process(tmp_path):
    host = ServingHost(tmp_path, apps=without_foreign())
    # No pid file: the process manager started nothing here.
    result = assess(host, checks=['gpu_clean'], own_pid_files=[host.pid_file])
    assert result['checks']['gpu_clean']['value']['own_errors'] == []
    assert result['checks']['gpu_clean']['value']['foreign'] == RANKS
    # PID 48200 now runs since another time: not the server the file recorded.
    host.record_pid_file('48200 12345\n')
    result = assess(host, checks=['gpu_clean'], own_pid_files=[host.pid_file])
    assert result['checks']['gpu_clean']['value']['foreign'] == RANKS
    # A file that is not the process manager's is named.
    host.record_pid_file('sglang\n')
    result = assess(host, checks=['gpu_clean'], own_pid_files=[host.pid_file])
    assert 'does not hold "PID STARTTIME"' in result['checks']['gpu_clean']['value']['own_errors'][0]
