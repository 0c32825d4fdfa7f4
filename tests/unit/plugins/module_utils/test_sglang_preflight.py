# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight checks over a fake /proc, files in tmp_path with owners and modes as the checks
see them, a fake account database, and GPU facts collected from recorded nvidia-smi output."""

from __future__ import annotations

import os
import stat
from types import SimpleNamespace

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.sglang import preflight as pf
from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.facts import collect_gpu_facts

A100_GPU3 = 'GPU-f26547dc-a3ff-c4fa-07dc-3220a912a8ce'
ANY4, LOOPBACK4 = '00000000', '0100007F'
TCP_HEADER = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n'
ROOT, SGLANG, VIDEO, ALICE = 0, 999, 44, 1000


class FakeSystem(pf.System):
    """Accounts: root, sglang (999, also in video), alice (1000). Files keep their real type, with
    owner and mode from `own`; tmp_path and the directories above it are root's 0755."""

    def __init__(self, tmp_path):
        self.tmp = str(tmp_path)
        self.proc = str(tmp_path / 'proc')
        os.makedirs(os.path.join(self.proc, 'net'))
        self.tcp = {'tcp': [TCP_HEADER], 'tcp6': [TCP_HEADER]}
        self.write_tcp()
        self.modes = {}
        self.read_only = set()
        self.euid = ROOT
        self.users = {'root': (ROOT, ROOT), 'sglang': (SGLANG, SGLANG), 'alice': (ALICE, ALICE)}
        self.groups = {ROOT: ('root', []), SGLANG: ('sglang', []), VIDEO: ('video', ['sglang']), ALICE: ('alice', [])}

    # files

    def own(self, path, uid, gid, mode):
        self.modes[str(path)] = (uid, gid, mode)

    def stat(self, path):
        real = os.stat(path)
        if path in self.modes:
            uid, gid, mode = self.modes[path]
        elif (self.tmp + '/').startswith(path.rstrip('/') + '/'):
            uid, gid, mode = ROOT, ROOT, 0o755
        else:
            uid, gid, mode = ROOT, ROOT, stat.S_IMODE(real.st_mode)
        fields = list(real)
        fields[stat.ST_MODE] = stat.S_IFMT(real.st_mode) | mode
        fields[stat.ST_UID], fields[stat.ST_GID] = uid, gid
        return os.stat_result(fields)

    def statvfs(self, path):
        return SimpleNamespace(f_flag=os.ST_RDONLY if path in self.read_only else 0)

    # accounts

    def getpwnam(self, name):
        uid, gid = self.users[name]
        return SimpleNamespace(pw_name=name, pw_uid=uid, pw_gid=gid)

    def getpwuid(self, uid):
        for name, (user_id, gid) in self.users.items():
            if user_id == uid:
                return SimpleNamespace(pw_name=name, pw_uid=uid, pw_gid=gid)
        raise KeyError(uid)

    def getgrgid(self, gid):
        return SimpleNamespace(gr_name=self.groups[gid][0], gr_gid=gid)

    def getgrall(self):
        return [SimpleNamespace(gr_name=name, gr_gid=gid, gr_mem=members) for gid, (name, members) in self.groups.items()]

    def geteuid(self):
        return self.euid

    @staticmethod
    def host_addresses(host):
        if host == 'nowhere.example':
            raise ValueError('nowhere.example does not resolve: [Errno -2] Name or service not known')
        return pf.procfs.host_addresses(host)

    # /proc

    def process(self, pid, argv, ppid=1, sockets=()):
        directory = os.path.join(self.proc, str(pid))
        os.makedirs(os.path.join(directory, 'fd'))
        with open(os.path.join(directory, 'stat'), 'w') as handle:
            handle.write('%d (%s) S %d %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0\n'
                         % (pid, os.path.basename(argv[0])[:15], ppid, pid, pid))
        with open(os.path.join(directory, 'cmdline'), 'wb') as handle:
            handle.write(b''.join(arg.encode() + b'\0' for arg in argv))
        for fd, inode in enumerate(sockets, 3):
            os.symlink('socket:[%d]' % inode, os.path.join(directory, 'fd', str(fd)))

    def listen(self, address_hex, port, inode):
        table = self.tcp['tcp' if len(address_hex) == 8 else 'tcp6']
        table.append('%4d: %s:%04X %s:0000 0A 00000000:00000000 00:00000000 00000000 0 0 %d 1 0 100 0 0 10 0\n'
                     % (len(table) - 1, address_hex, port, '0' * len(address_hex), inode))
        self.write_tcp()

    def write_tcp(self):
        for name, lines in self.tcp.items():
            with open(os.path.join(self.proc, 'net', name), 'w') as handle:
                handle.write(''.join(lines))


@pytest.fixture
def system(tmp_path):
    return FakeSystem(tmp_path)


@pytest.fixture
def facts_of(smi_replay):
    """GPU facts of a recorded host, as the module collects them (no pynvml, nvidia-smi replayed)."""

    def collect(host, apps=None):
        overrides = {'query_apps.csv': (0, apps)} if apps is not None else None
        replay = smi_replay(host, overrides=overrides)
        return collect_gpu_facts(replay, lambda name: '/usr/bin/nvidia-smi', import_nvml=no_pynvml)

    return collect


def options(**overrides):
    base = {'model_path': None, 'tp': 1, 'pp': 1, 'gpu_count': None, 'host': '127.0.0.1', 'port': 30000,
            'log_dir': None, 'user': None, 'release': None, 'expected_release': None, 'own_pids': [],
            'gpu_memory_threshold_mib': 1024, 'ignore': [], 'command_timeout': 30}
    base.update(overrides)
    return base


def run(system, facts=None, **overrides):
    def gpu_facts():
        if facts is None:
            raise AssertionError('GPU facts should not be collected')
        return facts
    return pf.preflight(options(**overrides), gpu_facts=gpu_facts, system=system)


def no_pynvml():
    raise ImportError("No module named 'pynvml'")


NO_GPU_CHECKS = {'ignore': ['gpu_count', 'gpu_clean']}


def statuses(result):
    return dict((name, check['status']) for name, check in result['checks'].items())


# the whole run

def test_everything_given_and_clean(system, tmp_path, facts_of):
    model = tmp_path / 'models' / 'qwen'
    model.mkdir(parents=True)
    logs = tmp_path / 'log'
    logs.mkdir()
    system.own(logs, SGLANG, SGLANG, 0o750)
    release = tmp_path / 'ml-env.d' / 'releases' / 'abc'
    release.mkdir(parents=True)
    (release / '.verified').write_text('abc\n')
    os.symlink(str(release), str(tmp_path / 'ml-env'))
    system.process(560, ['python', '-m', 'sglang.launch_server'])
    system.process(562, ['sglang::scheduler_TP0'], ppid=560)
    result = run(system, facts_of('h200x2_nvlink'), model_path=str(model), tp=2, log_dir=str(logs), user='sglang',
                 release=str(tmp_path / 'ml-env'), expected_release=str(release), own_pids=[560])
    assert result['problems'] == []
    assert statuses(result) == dict((name, 'ok') for name in pf.CHECKS)
    assert result['checks']['gpu_count']['reason'] == 'tp 2 x pp 1 = 2 GPUs needed, 2 found (gpu_info)'
    assert result['checks']['port']['reason'] == 'port 30000 on 127.0.0.1 is free'
    assert result['checks']['release']['reason'] == '%s resolves to the verified release %s' % (
        tmp_path / 'ml-env', release)
    assert [(p['gpu_index'], p['pid'], p['cmdline'], p['own']) for p in result['gpu_processes']] == [
        (0, 562, 'sglang::scheduler_TP0', True), (1, 562, 'sglang::scheduler_TP0', True)]
    assert result['port_holders'] == []


def test_nothing_given_checks_only_the_port(system):
    result = run(system, **NO_GPU_CHECKS)
    assert result['problems'] == []
    assert result['checks'] == {
        'model_path': {'status': 'skipped', 'reason': 'model_path not given'},
        'gpu_count': {'status': 'skipped', 'reason': 'ignored'},
        'gpu_clean': {'status': 'skipped', 'reason': 'ignored'},
        'port': {'status': 'ok', 'reason': 'port 30000 on 127.0.0.1 is free'},
        'log_dir': {'status': 'skipped', 'reason': 'log_dir not given'},
        'release': {'status': 'skipped', 'reason': 'release not given'},
    }


def test_failure_message():
    assert pf.failure_message(['one; fix']) == 'one; fix'
    assert pf.failure_message(['a; x', 'b; y']) == 'SGLang preflight found 2 problems: (1) a; x (2) b; y'


# model_path

def test_hub_id_is_skipped_and_reported(system):
    result = run(system, model_path='Qwen/Qwen3-8B', **NO_GPU_CHECKS)
    assert result['checks']['model_path'] == {
        'status': 'skipped', 'reason': 'Qwen/Qwen3-8B is not an absolute path: taken as a Hugging Face hub id, not checked'}


def test_missing_model_path(system, tmp_path):
    missing = str(tmp_path / 'models' / 'nope')
    result = run(system, model_path=missing, **NO_GPU_CHECKS)
    assert result['problems'] == [
        'model_path %s does not exist; put the model there or set sglang_server_model_path to a local model '
        'directory or a Hugging Face hub id' % missing]
    assert result['checks']['model_path'] == {'status': 'failed', 'reason': result['problems'][0]}


def test_model_behind_a_private_directory(system, tmp_path):
    private = tmp_path / 'root-home'
    (private / 'model').mkdir(parents=True)
    system.own(private, ROOT, ROOT, 0o700)
    result = run(system, model_path=str(private / 'model'), user='sglang', **NO_GPU_CHECKS)
    assert result['problems'] == [
        'model_path %s/model is not readable by user sglang (uid 999, groups video, sglang): %s (owner root:root, '
        'mode 0700) does not let it search; give it access (chgrp/chmod) or move the model' % (private, private)]


@pytest.mark.parametrize('owner, mode, ok', [
    ((ROOT, VIDEO), 0o640, True),      # through a supplementary group
    ((ROOT, ROOT), 0o600, False),
    ((SGLANG, ROOT), 0o044, False),     # the owner class decides even when group and other may
    ((ROOT, ROOT), 0o644, True),
])
def test_single_file_model(system, tmp_path, owner, mode, ok):
    gguf = tmp_path / 'model.gguf'
    gguf.write_text('GGUF')
    system.own(gguf, owner[0], owner[1], mode)
    result = run(system, model_path=str(gguf), user='sglang', **NO_GPU_CHECKS)
    assert (result['checks']['model_path']['status'] == 'ok') is ok
    if not ok:
        assert result['problems'][0].endswith('%s (owner %s:%s, mode %04o) does not let it read; give it access '
                                              '(chgrp/chmod) or move the model' % (
                                                  gguf, {0: 'root', 999: 'sglang'}[owner[0]], 'root', mode))


# gpu_count

def test_gpu_count_given(system):
    result = run(system, tp=8, gpu_count=2, ignore=['gpu_clean'])
    assert result['problems'] == ['tp 8 x pp 1 = 8 GPUs needed, 2 found (gpu_count); lower --tp/--pp in '
                                  'sglang_server_args or run on a host with 8 GPUs']


def test_a_member_of_a_multi_node_group_needs_its_share_of_the_gpus(system, facts_of):
    # --tp 4 over 2 nodes: 2 ranks, so 2 GPUs, on each (SGLang's tp_size_per_node)
    result = run(system, facts_of('h200x2_nvlink'), tp=4, nnodes=2, own_pids=[562])
    assert result['problems'] == []
    assert result['checks']['gpu_count']['reason'] == 'tp 4 x pp 1 / 2 nodes = 2 GPUs needed, 2 found (gpu_info)'
    result = run(system, tp=8, nnodes=2, gpu_count=2, ignore=['gpu_clean'])
    assert result['problems'] == ['tp 8 x pp 1 / 2 nodes = 4 GPUs needed, 2 found (gpu_count); lower --tp/--pp in '
                                  'sglang_server_args or run on a host with 4 GPUs']


def test_gpu_count_from_facts(system, facts_of):
    result = run(system, facts_of('h200x2_nvlink'), tp=4, pp=2, own_pids=[562])
    assert result['problems'] == ['tp 4 x pp 2 = 8 GPUs needed, 2 found (gpu_info); lower --tp/--pp in '
                                  'sglang_server_args or run on a host with 8 GPUs']
    # Needing more GPUs than there are, all of them are checked.
    assert result['checks']['gpu_clean']['status'] == 'ok'


@pytest.mark.parametrize('host', ['broken_driver', None])
def test_no_gpu_backend(system, facts_of, host):
    if host:
        facts = facts_of(host)
    else:
        facts = collect_gpu_facts(lambda argv: (0, '', ''), lambda name: None, import_nvml=no_pynvml)
    assert facts['backend'] == 'none'
    result = run(system, facts)
    assert result['checks']['gpu_clean'] == {'status': 'skipped', 'reason': 'no nvidia-smi/NVML'}
    (problem,) = result['problems']
    assert problem.startswith('tp 1 x pp 1 = 1 GPU needed, 0 found (gpu_info: no nvidia-smi/NVML: NVML: ')
    assert facts['reason'] in problem
    assert problem.endswith('; install or repair the NVIDIA driver, or list gpu_count and gpu_clean in '
                            'sglang_server_preflight_ignore on a host without GPUs')
    ignored = run(system, facts, ignore=['gpu_count'])
    assert ignored['problems'] == []
    assert ignored['checks']['gpu_count'] == {'status': 'skipped', 'reason': 'ignored: ' + problem}


def test_gpu_facts_not_collected_when_not_needed(system):
    result = run(system, gpu_count=8, tp=8, ignore=['gpu_clean'])
    assert result['checks']['gpu_count']['status'] == 'ok' and result['gpu_processes'] == []


# gpu_clean

def test_foreign_process_on_a_used_gpu(system, facts_of):
    system.process(4242, ['python', 'train.py'])
    facts = facts_of('a100x4_mixed', apps='%s, 4242, python, 18432\n' % A100_GPU3)
    result = run(system, facts, tp=4)
    assert result['problems'] == ['GPU 3 is in use by a foreign process: PID 4242 (python train.py) holds 18432 MiB; '
                                  'stop it or free the GPU before starting SGLang']
    assert result['gpu_processes'] == [{'gpu_index': 3, 'gpu_uuid': A100_GPU3, 'pid': 4242, 'name': 'python',
                                        'used_memory_mib': 18432, 'cmdline': 'python train.py', 'own': False}]
    # With TP 2 the server uses GPUs 0 and 1 only.
    result = run(system, facts, tp=2)
    assert result['problems'] == []
    assert result['checks']['gpu_clean']['reason'] == (
        'GPUs 0, 1: no foreign compute process, at most 1024 MiB in use besides the server')


def test_foreign_process_invisible_in_proc(system, facts_of):
    result = run(system, facts_of('h200x2_nvlink'), tp=2)
    assert result['problems'] == [
        'GPU 0 is in use by a foreign process: PID 562 (python3, command line not visible) holds 4614 MiB; '
        'stop it or free the GPU before starting SGLang',
        'GPU 1 is in use by a foreign process: PID 562 (python3, command line not visible) holds 1542 MiB; '
        'stop it or free the GPU before starting SGLang']


def test_own_descendants_and_unknown_memory(system, facts_of):
    facts = facts_of('rtxpro6000x8_pcie')
    pids = [p['pid'] for p in facts['processes']]
    system.process(48200, ['python3', '-m', 'sglang.launch_server', '--tp', '8'])
    for pid in pids:
        system.process(pid, ['sglang::scheduler_TP%d' % pids.index(pid)], ppid=48200)
    result = run(system, facts, tp=8, own_pids=[48200])
    assert result['problems'] == []
    assert all(p['own'] for p in result['gpu_processes'])
    result = run(system, facts, tp=8, own_pids=[])
    assert len(result['problems']) == 8
    assert result['problems'][3] == ('GPU 3 is in use by a foreign process: PID 48219 (sglang::scheduler_TP3) holds '
                                     'GPU memory (amount not reported); stop it or free the GPU before starting SGLang')


def test_memory_no_process_explains(system, facts_of):
    facts = facts_of('h200x2_nvlink', apps='')
    result = run(system, facts, tp=1)
    assert result['problems'] == [
        'GPU 0 has 4623 MiB in use (threshold 1024 MiB) that no listed process holds (an orphan or a process in '
        'another PID namespace); free the GPU or raise sglang_server_preflight_gpu_memory_threshold_mib']
    assert run(system, facts, tp=1, gpu_memory_threshold_mib=5000)['problems'] == []


def test_memory_beyond_the_servers_own(system, facts_of):
    facts = facts_of('h200x2_nvlink')
    facts['gpus'][1]['memory_used_mib'] = 1542 + 3000
    result = run(system, facts, tp=2, own_pids=[562])
    assert result['problems'] == [
        "GPU 1 has 3000 MiB in use beyond the server's own 1542 MiB (threshold 1024 MiB) that no listed process "
        "holds (an orphan or a process in another PID namespace); free the GPU or raise "
        "sglang_server_preflight_gpu_memory_threshold_mib"]


def test_process_on_an_unindexed_gpu_counts(system, facts_of):
    facts = facts_of('a100x4_mixed', apps='MIG-1234, 77, python3, 100\n')
    result = run(system, facts, tp=1)
    assert result['problems'] == ['GPU MIG-1234 is in use by a foreign process: PID 77 (python3, command line not '
                                  'visible) holds 100 MiB; stop it or free the GPU before starting SGLang']


def test_hung_nvidia_smi_is_one_problem(system):
    def hung():
        raise CommandTimeout(['/usr/bin/nvidia-smi', '--query-gpu=index'], 30, 'command_timeout')

    result = pf.preflight(options(), gpu_facts=hung, system=system)
    (problem,) = result['problems']
    assert problem.startswith('`/usr/bin/nvidia-smi --query-gpu=index` did not finish within 30 s')
    assert 'Xid 79' in problem
    assert statuses(result)['gpu_clean'] == 'failed'
    assert result['checks']['gpu_count'] == {'status': 'skipped', 'reason': 'GPU facts could not be collected '
                                                                            '(see gpu_clean)'}
    result = pf.preflight(options(ignore=['gpu_clean']), gpu_facts=hung, system=system)
    assert statuses(result)['gpu_count'] == 'failed' and len(result['problems']) == 1


# port

def test_port_held_by_a_foreign_process(system):
    system.process(77, ['nginx: master process'], sockets=[901])
    system.listen(LOOPBACK4, 30000, 901)
    result = run(system, **NO_GPU_CHECKS)
    assert result['problems'] == ['port 30000 on 127.0.0.1 is held by PID 77 (nginx: master process); free it or '
                                  'set sglang_server_port']
    assert result['port_holders'] == [{'pid': 77, 'cmdline': 'nginx: master process', 'address': '127.0.0.1',
                                       'own': False}]


def test_port_held_through_a_wildcard_by_several(system):
    system.process(77, ['nginx: master process'], sockets=[901])
    system.process(78, ['nginx: worker process'], ppid=77, sockets=[901])
    system.process(79, ['python', 'x.py'])
    system.listen(ANY4, 30000, 901)
    system.listen(ANY4, 31000, 902)
    result = run(system, **NO_GPU_CHECKS)
    assert result['problems'] == ['port 30000 on 127.0.0.1 is held by PID 77 (nginx: master process) listening on '
                                  '0.0.0.0, PID 78 (nginx: worker process) listening on 0.0.0.0; free it or set '
                                  'sglang_server_port']
    unseen = run(system, port=31000, **NO_GPU_CHECKS)
    assert unseen['problems'] == ['port 31000 on 127.0.0.1 is held by a process this module cannot see listening on '
                                  '0.0.0.0 (in another PID namespace, a container?); free it or set sglang_server_port']
    assert unseen['port_holders'] == [{'pid': None, 'cmdline': '', 'address': '0.0.0.0', 'own': False}]
    system.euid = ALICE
    assert run(system, port=31000, **NO_GPU_CHECKS)['problems'][0].endswith(
        '0.0.0.0 (run this as root to name it); free it or set sglang_server_port')


def test_port_held_by_the_server_itself(system):
    system.process(100, ['python', '-m', 'sglang.launch_server'])
    system.process(101, ['sglang::tokenizer'], ppid=100, sockets=[901])
    system.listen(LOOPBACK4, 30000, 901)
    result = run(system, own_pids=[100], **NO_GPU_CHECKS)
    assert result['problems'] == []
    assert result['checks']['port']['reason'] == 'port 30000 on 127.0.0.1 is held by the server itself (PID 101)'
    assert result['port_holders'][0]['own'] is True


def test_port_on_another_address_is_free(system):
    system.process(77, ['redis'], sockets=[901])
    system.listen('0500000A', 30000, 901)    # 10.0.0.5
    assert run(system, **NO_GPU_CHECKS)['problems'] == []
    assert len(run(system, host='0.0.0.0', **NO_GPU_CHECKS)['problems']) == 1


def test_port_for_every_address(system):
    system.process(77, ['python', 'local.py'], sockets=[901])
    system.listen('00000000000000000000000001000000', 30000, 901)    # ::1
    assert run(system, host='0.0.0.0', **NO_GPU_CHECKS)['problems'] == []
    assert run(system, host='', **NO_GPU_CHECKS)['problems'] == [
        'port 30000 on all addresses is held by PID 77 (python local.py) listening on ::1; free it or set '
        'sglang_server_port']


@pytest.mark.parametrize('port', [0, 65536])
def test_port_out_of_range(system, port):
    result = run(system, port=port, **NO_GPU_CHECKS)
    assert result['problems'] == ['port %d is not a TCP port (1-65535); set sglang_server_port to a free port' % port]


def test_host_that_does_not_resolve(system):
    result = run(system, host='nowhere.example', **NO_GPU_CHECKS)
    assert result['problems'] == ['host nowhere.example does not resolve: [Errno -2] Name or service not known; set '
                                  'sglang_server_host to an address of this host']


def test_ignored_port_reports_what_it_found(system):
    system.process(77, ['nginx'], sockets=[901])
    system.listen(LOOPBACK4, 30000, 901)
    result = run(system, ignore=['port', 'gpu_count', 'gpu_clean'])
    assert result['problems'] == []
    assert result['checks']['port'] == {
        'status': 'skipped',
        'reason': 'ignored: port 30000 on 127.0.0.1 is held by PID 77 (nginx); free it or set sglang_server_port'}


# log_dir

@pytest.fixture
def logs(tmp_path):
    path = tmp_path / 'var' / 'log' / 'sglang'
    path.mkdir(parents=True)
    return path


@pytest.mark.parametrize('owner, mode', [
    ((SGLANG, SGLANG), 0o750),
    ((ROOT, SGLANG), 0o770),
    ((ROOT, VIDEO), 0o1770),
    ((ALICE, ALICE), 0o777),
])
def test_log_dir_writable(system, logs, owner, mode):
    system.own(logs, owner[0], owner[1], mode)
    result = run(system, log_dir=str(logs), user='sglang', **NO_GPU_CHECKS)
    assert result['checks']['log_dir'] == {'status': 'ok', 'reason': '%s is writable by user sglang' % logs}


@pytest.mark.parametrize('owner, mode', [
    ((ROOT, ROOT), 0o755),
    ((SGLANG, ROOT), 0o577),     # the owner's bits decide for the owner
    ((ROOT, VIDEO), 0o750),
    ((ROOT, SGLANG), 0o760),     # write without search is no use
])
def test_log_dir_not_writable(system, logs, owner, mode):
    system.own(logs, owner[0], owner[1], mode)
    result = run(system, log_dir=str(logs), user='sglang', **NO_GPU_CHECKS)
    names = {ROOT: 'root', SGLANG: 'sglang', VIDEO: 'video'}
    assert result['problems'] == [
        'log_dir %s is not writable by user sglang (uid 999, groups video, sglang): %s (owner %s:%s, mode %04o) '
        'does not let it write; chown it to sglang or make it writable by one of its groups'
        % (logs, logs, names[owner[0]], names[owner[1]], mode)]


def test_log_dir_behind_a_closed_parent(system, logs):
    system.own(logs, SGLANG, SGLANG, 0o750)
    system.own(logs.parent, ROOT, ROOT, 0o750)
    result = run(system, log_dir=str(logs), user='sglang', **NO_GPU_CHECKS)
    assert result['problems'] == [
        'log_dir %s is not writable by user sglang (uid 999, groups video, sglang): %s (owner root:root, mode 0750) '
        'does not let it search; chown it to sglang or make it writable by one of its groups' % (logs, logs.parent)]


def test_log_dir_missing_not_a_directory_read_only(system, tmp_path, logs):
    missing = str(tmp_path / 'nope')
    assert run(system, log_dir=missing, user='sglang', **NO_GPU_CHECKS)['problems'] == [
        'log_dir %s does not exist; create it writable by the service user (the sglang_server role does) or set '
        'sglang_server_log_dir' % missing]
    (tmp_path / 'file').write_text('')
    assert run(system, log_dir=str(tmp_path / 'file'), **NO_GPU_CHECKS)['problems'] == [
        'log_dir %s is not a directory; remove it or set sglang_server_log_dir' % (tmp_path / 'file')]
    system.read_only.add(str(logs))
    assert run(system, log_dir=str(logs), **NO_GPU_CHECKS)['problems'] == [
        'log_dir %s is on a read-only filesystem; set sglang_server_log_dir to a writable place' % logs]


def test_log_dir_for_root_and_the_default_user(system, logs):
    system.own(logs, ALICE, ALICE, 0o700)
    result = run(system, log_dir=str(logs), **NO_GPU_CHECKS)
    assert result['checks']['log_dir'] == {'status': 'ok', 'reason': '%s is writable by user root' % logs}
    system.euid = ALICE
    assert run(system, log_dir=str(logs), **NO_GPU_CHECKS)['checks']['log_dir']['status'] == 'ok'
    system.euid = SGLANG
    assert run(system, log_dir=str(logs), **NO_GPU_CHECKS)['checks']['log_dir']['status'] == 'failed'


def test_missing_user(system, logs, tmp_path):
    (tmp_path / 'model').mkdir()
    for log_dir in (str(logs), None):
        result = run(system, log_dir=log_dir, user='nosuch', model_path=str(tmp_path / 'model'), **NO_GPU_CHECKS)
        assert result['problems'] == ['user nosuch does not exist; create it (the sglang_server role does) or set '
                                      'sglang_server_user']
        assert result['checks']['model_path'] == {
            'status': 'ok', 'reason': '%s exists (its readability was not checked: the user does not exist)'
            % (tmp_path / 'model')}


# release

@pytest.fixture
def ml_env(tmp_path):
    releases = tmp_path / 'ml-env.d' / 'releases'
    for name in ('abc', 'def'):
        (releases / name).mkdir(parents=True)
    (releases / 'abc' / '.verified').write_text('abc\n')
    link = tmp_path / 'ml-env'
    os.symlink(str(releases / 'abc'), str(link))
    return SimpleNamespace(link=str(link), releases=releases, current=str(releases / 'abc'))


def test_release_verified_and_expected(system, ml_env):
    for expected in (ml_env.current, 'abc', None):
        result = run(system, release=ml_env.link, expected_release=expected, user='sglang', **NO_GPU_CHECKS)
        assert result['checks']['release']['status'] == 'ok', result['problems']


def test_release_without_marker(system, ml_env):
    os.unlink(ml_env.link)
    os.symlink(str(ml_env.releases / 'def'), ml_env.link)
    (ml_env.releases / 'def' / '.verified').mkdir()    # a directory is no marker either
    result = run(system, release=ml_env.link, **NO_GPU_CHECKS)
    assert result['problems'] == [
        'release %s resolves to %s which has no .verified marker; run the ml_env role to verify it or roll back to '
        'a verified release (ml_env_rollback)' % (ml_env.link, ml_env.releases / 'def')]


def test_release_not_the_expected_one(system, ml_env):
    expected = str(ml_env.releases / 'def')
    result = run(system, release=ml_env.link, expected_release=expected, **NO_GPU_CHECKS)
    assert result['problems'] == [
        'release %s resolves to %s, not to %s, the release ml_env verified (ml_env_release); run the ml_env role '
        'again so that both agree' % (ml_env.link, ml_env.current, expected)]
    assert len(run(system, release=ml_env.link, expected_release='def', **NO_GPU_CHECKS)['problems']) == 1


def test_release_missing_dangling_or_a_file(system, ml_env, tmp_path):
    missing = str(tmp_path / 'nope')
    assert run(system, release=missing, **NO_GPU_CHECKS)['problems'] == [
        'release %s does not exist; run the ml_env role to build and switch to a verified release' % missing]
    os.unlink(ml_env.link)
    os.symlink(str(ml_env.releases / 'gone'), ml_env.link)
    assert run(system, release=ml_env.link, **NO_GPU_CHECKS)['problems'] == [
        'release %s does not exist (it resolves to %s); run the ml_env role to build and switch to a verified '
        'release' % (ml_env.link, ml_env.releases / 'gone')]
    (ml_env.releases / 'gone').write_text('')
    assert run(system, release=ml_env.link, **NO_GPU_CHECKS)['problems'] == [
        'release %s resolves to %s which is not a directory; run the ml_env role to switch to a verified release'
        % (ml_env.link, ml_env.releases / 'gone')]


def test_release_unreadable_by_the_user(system, ml_env):
    system.own(ml_env.current, ROOT, ROOT, 0o700)
    result = run(system, release=ml_env.link, user='sglang', **NO_GPU_CHECKS)
    assert result['problems'] == [
        'release %s resolves to %s which user sglang (uid 999, groups video, sglang) cannot use: %s (owner '
        'root:root, mode 0700) does not let it read; make the release readable by it'
        % (ml_env.link, ml_env.current, ml_env.current)]
    assert run(system, release=ml_env.link, user='root', **NO_GPU_CHECKS)['problems'] == []


# helpers

def test_ancestors():
    assert pf.ancestors('/a/b/c') == ['/', '/a', '/a/b']
    assert pf.ancestors('/a') == ['/']


def test_gpus_in_use():
    gpus = [{'index': i} for i in (3, 0, 2, 1)]
    assert pf.gpus_in_use(gpus, 2) == [0, 1]
    assert pf.gpus_in_use(gpus, 4) == pf.gpus_in_use(gpus, 16) == [0, 1, 2, 3]


def test_one_line():
    assert pf.one_line('python -c\nimport x\n  x.run()') == 'python -c import x x.run()'
    assert len(pf.one_line('x' * 500)) == pf.CMDLINE_MAX and pf.one_line('x' * 500).endswith('...')
