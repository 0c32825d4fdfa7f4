# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The record of a converged node on a real filesystem: every kind of drift is found, nothing else is."""

from __future__ import annotations

import json
import os
import time

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.fleet import converged

DIGEST = 'a' * 64


class Fake:
    """systemctl, HTTP and the release check, as the node answers them."""

    def __init__(self):
        self.units = {'sglang-server.service': ('active', 'enabled')}
        self.status = 200
        self.damaged = ''
        self.calls = []

    def run_command(self, argv):
        self.calls.append(argv)
        active, enabled = self.units.get(argv[2], ('inactive', 'disabled'))
        return 0, (active if argv[1] == 'is-active' else enabled) + '\n', ''

    def http_status(self, url, timeout):
        self.calls.append(['GET', url, timeout])
        return (self.status, '') if self.status else (None, 'Connection refused')

    def integrity(self, release):
        self.calls.append(['integrity', release])
        return self.damaged


@pytest.fixture
def node(tmp_path):
    fake = Fake()
    (tmp_path / 'os-release').write_text('PRETTY_NAME="Ubuntu 24.04.3 LTS"\nID=ubuntu\nID_LIKE=debian\n'
                                         'VERSION_ID="24.04"\n')
    host = converged.Host(fake.run_command, fake.http_status, fake.integrity, str(tmp_path / 'os-release'))
    (tmp_path / 'etc').mkdir()
    (tmp_path / 'etc' / 'unit').write_text('[Service]\n')
    (tmp_path / 'releases' / 'a').mkdir(parents=True)
    os.symlink(str(tmp_path / 'releases' / 'a'), str(tmp_path / 'ml-env'))
    big = tmp_path / 'ptxas'
    big.write_bytes(b'\0' * (converged.HASH_LIMIT + 1))
    gpus = tmp_path / 'nvidia'
    (gpus / 'gpus' / '0000:17:00.0').mkdir(parents=True)
    (gpus / 'version').write_text('NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05\nGCC version\n')
    spec = {'paths': [str(tmp_path / 'etc' / 'unit'), str(tmp_path / 'etc'), str(tmp_path / 'ml-env'), str(big),
                      str(tmp_path / 'etc' / 'absent.env')],
            'units': ['sglang-server.service'], 'releases': [str(tmp_path / 'ml-env')],
            'health_url': 'http://127.0.0.1:30000/health', 'gpu_dir': str(gpus)}
    record = str(tmp_path / 'state' / 'converged.json')
    os.mkdir(os.path.dirname(record))
    return tmp_path, fake, host, spec, record


def write_record(host, spec, record, digest=DIGEST):
    with open(record, 'w') as handle:
        handle.write(converged.dumps(converged.build_record(host, digest, spec)))


def test_an_unchanged_node_is_converged_after_every_check(node):
    root, fake, host, spec, record = node
    write_record(host, spec, record)
    assert converged.check(host, record, DIGEST, 30) == {'converged': True, 'drift': [], 'pending': [], 'facts': {}}
    # The costly reads ran too: the release check and the health request.
    assert ['integrity', str(root / 'releases' / 'a')] in fake.calls
    assert ['GET', 'http://127.0.0.1:30000/health', 30] in fake.calls


def test_the_record_keeps_small_files_by_hash_large_by_size_links_dirs_and_absence(node):
    root, fake, host, spec, record = node
    kept = converged.build_record(host, DIGEST, spec)['state']['paths']
    assert kept[str(root / 'etc' / 'unit')]['sha256'] and kept[str(root / 'etc' / 'unit')]['mode'] == '0644'
    assert kept[str(root / 'ptxas')]['size'] == converged.HASH_LIMIT + 1 and 'sha256' not in kept[str(root / 'ptxas')]
    assert kept[str(root / 'ml-env')] == {'kind': 'link', 'target': str(root / 'releases' / 'a')}
    assert kept[str(root / 'etc')]['kind'] == 'dir'
    assert kept[str(root / 'etc' / 'absent.env')] == {'kind': 'absent'}


@pytest.mark.parametrize('change, expected', [
    (lambda root: (root / 'etc' / 'unit').write_text('[Service]\nX=1\n'), 'unit: its content changed'),
    (lambda root: os.chmod(str(root / 'etc' / 'unit'), 0o600), 'unit: was a file (mode 0644'),
    (lambda root: (root / 'etc' / 'absent.env').write_text('x'), 'absent.env: was absent, is a file'),
    (lambda root: os.remove(str(root / 'etc' / 'unit')), 'unit: was a file (mode 0644, uid'),
    (lambda root: (os.remove(str(root / 'ml-env')), os.symlink('/elsewhere', str(root / 'ml-env'))),
     'ml-env: was a link to'),
    (lambda root: os.utime(str(root / 'ptxas'), (1, 1)), 'ptxas: its content changed'),
    (lambda root: os.rmdir(str(root / 'nvidia' / 'gpus' / '0000:17:00.0')), 'the GPUs or the driver changed'),
    (lambda root: (root / 'nvidia' / 'version').write_text('NVRM version: 590.1\n'), 'the GPUs or the driver changed'),
])
def test_each_kind_of_drift_is_named(node, change, expected):
    root, fake, host, spec, record = node
    write_record(host, spec, record)
    change(root)
    found = converged.check(host, record, DIGEST, 30)
    assert not found['converged'] and any(expected in reason for reason in found['drift']), found['drift']
    # A cheap difference is enough: the release check and the health request did not run.
    assert not [call for call in fake.calls if call[0] in ('integrity', 'GET')]


def test_a_stopped_or_disabled_unit_is_drift(node):
    root, fake, host, spec, record = node
    write_record(host, spec, record)
    fake.units['sglang-server.service'] = ('failed', 'enabled')
    found = converged.check(host, record, DIGEST, 30)
    assert found['drift'] == ['sglang-server.service: was active and enabled, is failed and enabled']


def test_a_damaged_release_and_an_unhealthy_server_are_drift(node):
    root, fake, host, spec, record = node
    write_record(host, spec, record)
    fake.damaged = 'files differ from their RECORD in torch'
    assert 'files differ from their RECORD in torch' in converged.check(host, record, DIGEST, 30)['drift'][0]
    fake.damaged, fake.status = '', 503
    assert converged.check(host, record, DIGEST, 30)['drift'] == ['http://127.0.0.1:30000/health answered 503']
    fake.status = None
    assert 'Connection refused' in converged.check(host, record, DIGEST, 30)['drift'][0]


def test_a_node_that_does_not_serve_is_not_fit_to_be_recorded(node):
    root, fake, host, spec, record = node
    assert converged.not_serving(host, converged.build_record(host, DIGEST, spec), 30) == []
    # A server that crashed after its gate: systemd waits out RestartSec in auto-restart (activating).
    fake.units['sglang-server.service'] = ('activating', 'enabled')
    fake.status = None
    assert converged.not_serving(host, converged.build_record(host, DIGEST, spec), 30) == [
        'sglang-server.service is activating, not active',
        'http://127.0.0.1:30000/health answered Connection refused']
    fake.units['sglang-server.service'], fake.status = ('active', 'enabled'), 503
    assert converged.not_serving(host, converged.build_record(host, DIGEST, spec), 30) == [
        'http://127.0.0.1:30000/health answered 503']
    # A node the operator stopped (no health URL) is recorded as it is.
    fake.units['sglang-server.service'] = ('inactive', 'disabled')
    assert converged.not_serving(host, converged.build_record(host, DIGEST, dict(spec, health_url='')), 30) == []


def test_another_digest_is_drift(node):
    root, fake, host, spec, record = node
    write_record(host, spec, record)
    found = converged.check(host, record, 'b' * 64, 30)
    assert found == {'converged': False,
                     'drift': ['the input changed since the last converge (inventory variables or the collection)'],
                     'pending': list(converged.ROLES), 'facts': {}}


@pytest.mark.parametrize('content, expected', [
    (None, 'no record of a converge'),
    ('{not json', 'is unreadable'),
    (json.dumps({'version': 0}), 'has another format'),
    (json.dumps(['a']), 'has another format'),
    (json.dumps({'version': converged.VERSION, 'digest': DIGEST, 'spec': {'paths': ['relative']}}), 'unusable spec'),
])
def test_a_missing_or_bad_record_is_never_converged(node, content, expected):
    root, fake, host, spec, record = node
    if content is not None:
        with open(record, 'w') as handle:
            handle.write(content)
    found = converged.check(host, record, DIGEST, 30)
    assert not found['converged'] and expected in found['drift'][-1]


def test_a_record_of_the_same_node_is_not_rewritten(node):
    root, fake, host, spec, record = node
    write_record(host, spec, record)
    assert not converged.record_changes(host, record, converged.build_record(host, DIGEST, dict(spec)))
    assert converged.record_changes(host, record, converged.build_record(host, 'b' * 64, spec))


def test_the_spec_is_checked(node):
    assert converged.spec_problems({'paths': ['a'], 'releases': ['/x'], 'health_url': 'ftp://x'}) == [
        "paths: every path must be absolute (got 'a')", "health_url: must start with http:// or https:// (got 'ftp://x')"]
    assert converged.spec_problems({'paths': ['/a'], 'releases': [], 'health_url': ''}) == []


def test_a_thousand_paths_are_checked_in_well_under_a_second(node, tmp_path):
    """The real size: a node's record holds a few dozen paths; a thousand stays cheap."""
    root, fake, host, spec, record = node
    many = tmp_path / 'many'
    many.mkdir()
    for index in range(1000):
        (many / str(index)).write_text('x' * 2048)
    spec = dict(spec, paths=[str(many / str(index)) for index in range(1000)])
    write_record(host, spec, record)
    started = time.monotonic()
    assert converged.check(host, record, DIGEST, 30)['converged']
    assert time.monotonic() - started < 1.0


# Per role: the record keeps each role's digest, paths and facts, and drift picks the roles to run.
ROLE_DIGESTS = dict((role, role[0] * 64) for role in converged.ROLES)
FACTS = {'cuda_toolkit': {'cuda_toolkit_home': '/usr/local/cuda-13.0'},
         'ml_env': {'ml_env_release': '/opt/ml-env-releases/a'},
         'runtime_env': {'runtime_env_nccl_profile_applied': 'pcie'},
         'sglang_server': {'sglang_server_managed_units': ['sglang-server.service']}}


def write_role_record(root, host, spec, record):
    owners = {'cuda_toolkit': [str(root / 'ptxas')], 'ml_env': [str(root / 'ml-env')],
              'runtime_env': [str(root / 'etc' / 'absent.env')], 'sglang_server': [str(root / 'etc' / 'unit')]}
    with open(record, 'w') as handle:
        handle.write(converged.dumps(converged.build_record(host, DIGEST, spec, ROLE_DIGESTS, owners, FACTS)))


def changed(role):
    return dict(ROLE_DIGESTS, **{role: 'z' * 64})


@pytest.mark.parametrize('hit, pending', [
    (None, list(converged.ROLES)),
    (set(), []),
    ({'sglang_server'}, ['gpu_health', 'sglang_server']),
    ({'gpu_health'}, ['gpu_health', 'sglang_server']),
    ({'runtime_env', 'sglang_server'}, ['runtime_env', 'gpu_health', 'sglang_server']),
    ({'cuda_toolkit'}, list(converged.ROLES)),
])
def test_the_pending_roles_run_from_the_first_hit_onward_and_always_through_the_gate(hit, pending):
    assert converged.pending_roles(hit) == pending


def test_a_change_of_the_server_input_runs_the_gate_and_the_server_with_the_others_facts(node):
    root, fake, host, spec, record = node
    write_role_record(root, host, spec, record)
    found = converged.check(host, record, 'b' * 64, 30, changed('sglang_server'))
    assert found['pending'] == ['gpu_health', 'sglang_server']
    assert 'sglang_server: its input changed' in found['drift']
    assert found['facts'] == dict(FACTS['cuda_toolkit'], **dict(FACTS['ml_env'], **FACTS['runtime_env']))


@pytest.mark.parametrize('change, pending', [
    (lambda root: (root / 'etc' / 'absent.env').write_text('x'), ['runtime_env', 'gpu_health', 'sglang_server']),
    (lambda root: (root / 'etc' / 'unit').write_text('[Service]\nX=1\n'), ['gpu_health', 'sglang_server']),
    (lambda root: os.utime(str(root / 'ptxas'), (1, 1)), list(converged.ROLES)),
    # The directory belongs to no role (as the rollback's snapshot files): every role.
    (lambda root: os.chmod(str(root / 'etc'), 0o700), list(converged.ROLES)),
    (lambda root: os.rmdir(str(root / 'nvidia' / 'gpus' / '0000:17:00.0')), list(converged.ROLES)),
])
def test_drift_of_what_a_role_manages_runs_that_role_and_those_after(node, change, pending):
    root, fake, host, spec, record = node
    write_role_record(root, host, spec, record)
    change(root)
    found = converged.check(host, record, DIGEST, 30, ROLE_DIGESTS)
    assert not found['converged'] and found['pending'] == pending, found
    assert sorted(found['facts']) == sorted(name for role in converged.ROLES if role not in pending
                                            for name in FACTS.get(role, {}))


def test_a_stopped_unit_is_the_servers_and_a_damaged_release_ml_envs(node):
    root, fake, host, spec, record = node
    write_role_record(root, host, spec, record)
    fake.units['sglang-server.service'] = ('failed', 'enabled')
    assert converged.check(host, record, DIGEST, 30, ROLE_DIGESTS)['pending'] == ['gpu_health', 'sglang_server']
    fake.units['sglang-server.service'] = ('active', 'enabled')
    fake.damaged = 'files differ from their RECORD in torch'
    pending = converged.check(host, record, DIGEST, 30, ROLE_DIGESTS)['pending']
    assert pending == ['ml_env', 'runtime_env', 'gpu_health', 'sglang_server']


def test_an_unhealthy_server_runs_every_role(node):
    root, fake, host, spec, record = node
    write_role_record(root, host, spec, record)
    fake.status = 503
    found = converged.check(host, record, 'b' * 64, 30, changed('sglang_server'))
    assert found['pending'] == list(converged.ROLES) and found['facts'] == {}
    assert 'http://127.0.0.1:30000/health answered 503' in found['drift']


def test_the_costly_reads_are_skipped_once_their_answer_cannot_matter(node):
    root, fake, host, spec, record = node
    write_role_record(root, host, spec, record)
    # ml_env pending already: its release is not checked; the server's health still is.
    found = converged.check(host, record, 'b' * 64, 30, changed('ml_env'))
    assert found['pending'] == ['ml_env', 'runtime_env', 'gpu_health', 'sglang_server']
    assert [call[0] for call in fake.calls if call[0] in ('integrity', 'GET')] == ['GET']
    # Every role pending: neither.
    del fake.calls[:]
    assert converged.check(host, record, 'b' * 64, 30, changed('cuda_toolkit'))['pending'] == list(converged.ROLES)
    assert not [call for call in fake.calls if call[0] in ('integrity', 'GET')]


def test_a_record_without_the_roles_digests_runs_every_role(node):
    root, fake, host, spec, record = node
    write_record(host, spec, record)
    assert converged.check(host, record, 'b' * 64, 30, changed('sglang_server'))['pending'] == list(converged.ROLES)
    (root / 'etc' / 'unit').write_text('[Service]\nX=1\n')
    assert converged.check(host, record, DIGEST, 30, ROLE_DIGESTS)['pending'] == list(converged.ROLES)


def test_a_variable_known_only_when_the_roles_run_sends_its_role_and_those_after(node):
    """Issue 41: a value built on a fact or a registered result is never taken as unchanged."""
    root, fake, host, spec, record = node
    write_role_record(root, host, spec, record)
    found = converged.check(host, record, DIGEST, 30, ROLE_DIGESTS,
                            {'sglang_server_args': 'it reads the gathered fact ansible_facts'})
    assert not found['converged'] and found['pending'] == ['gpu_health', 'sglang_server'], found
    assert found['drift'] == ['sglang_server_args: its value is known only when the roles run '
                              '(it reads the gathered fact ansible_facts)']
    # A collection-wide variable is every role's.
    found = converged.check(host, record, DIGEST, 30, ROLE_DIGESTS, {'inferops_proxy': 'x'})
    assert found['pending'] == list(converged.ROLES)
    # Together with a changed input of a later role: from the first of them.
    found = converged.check(host, record, 'b' * 64, 30, changed('sglang_server'), {'ml_env_profile': 'x'})
    assert found['pending'] == ['ml_env', 'runtime_env', 'gpu_health', 'sglang_server']


def test_a_changed_operating_system_sends_the_node_through_every_role(node):
    """The roles' own defaults read the distribution and the architecture (the toolkit's apt repository), which the
    fast path gathers on the node instead of as facts."""
    root, fake, host, spec, record = node
    write_role_record(root, host, spec, record)
    assert converged.check(host, record, DIGEST, 30, ROLE_DIGESTS)['converged']
    (root / 'os-release').write_text('ID=ubuntu\nID_LIKE=debian\nVERSION_ID="26.04"\n')
    found = converged.check(host, record, DIGEST, 30, ROLE_DIGESTS)
    assert found['pending'] == list(converged.ROLES)
    assert any(reason.startswith('the operating system changed: was ') and '26.04' in reason for reason in found['drift'])
