# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_server_host: what the role reads of a host, on a real directory tree."""

from __future__ import annotations

import grp
import hashlib
import os
import pwd

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.sglang import server_host as ssh

ME = pwd.getpwuid(os.getuid()).pw_name


class Groups(ssh.Host):
    """The real host, with the group names a GPU host has (gid 44 video, 993 render)."""
    NAMES = {0: 'root', 44: 'video', 993: 'render'}

    def group_name(self, gid):
        return self.NAMES.get(gid, str(gid))


def test_the_release_is_the_real_path_the_link_points_at(tmp_path):
    release = tmp_path / 'ml-env.d' / 'releases' / 'abc'
    release.mkdir(parents=True)
    (tmp_path / 'ml-env').symlink_to(release)
    assert ssh.release_of(ssh.Host(), str(tmp_path / 'ml-env')) == str(release)


def test_no_link_no_release(tmp_path):
    (tmp_path / 'ml-env').mkdir()
    assert ssh.release_of(ssh.Host(), str(tmp_path / 'ml-env')) == ''
    assert ssh.release_of(ssh.Host(), str(tmp_path / 'missing')) == ''
    assert ssh.release_of(ssh.Host(), '') == ''


def test_the_environment_file_checksum_is_the_stat_modules_sha1(tmp_path):
    env = tmp_path / 'runtime-env.env'
    env.write_text('CUDA_HOME=/usr/local/cuda-13.0\n')
    assert ssh.environment_file(ssh.Host(), str(env)) == dict(
        isreg=True, checksum=hashlib.sha1(b'CUDA_HOME=/usr/local/cuda-13.0\n').hexdigest())


def test_a_link_or_a_missing_path_is_no_environment_file(tmp_path):
    env = tmp_path / 'runtime-env.env'
    env.write_text('X=1\n')
    (tmp_path / 'link.env').symlink_to(env)
    for path in (tmp_path / 'link.env', tmp_path / 'missing.env', tmp_path):
        assert ssh.environment_file(ssh.Host(), str(path)) == dict(isreg=False, checksum='')


@pytest.mark.skipif(os.getuid() != 0, reason='gives the device nodes their groups')
def test_the_device_groups_are_those_of_the_gpu_nodes_two_levels_deep_root_excepted(tmp_path):
    for name, gid in (('nvidia0', 0), ('nvidiactl', 44), ('null', 5), ('dri/renderD128', 993), ('dri/card0', 44),
                      ('a/b/renderD129', 7)):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('')
        os.chown(str(path), -1, gid)
    # /dev/a/b/renderD129 is three levels down: not read; nvidia0 is root's.
    assert ssh.device_groups(Groups(), str(tmp_path)) == ['render', 'video']


def test_read_names_the_account_and_the_check_mode(tmp_path):
    env = tmp_path / 'runtime-env.env'
    env.write_text('X=1\n')
    params = dict(release_link=None, environment_file=str(env), user=ME, device_dir=str(tmp_path))
    result = ssh.read(ssh.Host(), params, check_mode=True)
    assert result['check_mode'] is True and result['changed'] is False
    assert result['user_exists'] is True and result['user_uid'] == os.getuid()
    assert result['release'] == '' and result['device_groups'] == []
    missing = ssh.read(ssh.Host(), dict(params, user='no-such-user-inferops'), check_mode=False)
    assert missing['user_exists'] is False and missing['user_uid'] == -1 and missing['check_mode'] is False


def test_group_names_fall_back_to_the_gid():
    assert ssh.Host().group_name(os.getgid()) == grp.getgrgid(os.getgid()).gr_name
    assert ssh.Host().group_name(2 ** 31 - 7) == str(2 ** 31 - 7)


class Accounts(ssh.Host):
    """Recorded accounts: sglang (uid 998) in group sglang (997), a member of video and render."""
    USERS = {'sglang': (998, 997, '/var/lib/sglang', '/usr/sbin/nologin')}
    GROUPS = {'sglang': 997, 'video': 44, 'render': 993}
    MEMBERS = {'sglang': ['render', 'video']}

    def account(self, name):
        return self.USERS.get(name)

    def group_gid(self, name):
        return self.GROUPS.get(name)

    def member_of(self, user):
        return self.MEMBERS.get(user, [])


WANTED = dict(user='sglang', group='sglang', home='/var/lib/sglang', shell='/usr/sbin/nologin', groups=['render', 'video'])


def test_an_account_as_the_role_leaves_it_needs_no_group_or_user_task():
    assert ssh.account_as_wanted(Accounts(), **WANTED) is True
    fewer = dict(WANTED)
    fewer['groups'] = ['video']  # a member of more groups than the devices need
    assert ssh.account_as_wanted(Accounts(), **fewer) is True


@pytest.mark.parametrize('change', [
    dict(user='nobody-here'),                  # no account yet
    dict(group='gpu'),                         # the group does not exist
    dict(group='video'),                       # another primary group
    dict(home='/srv/sglang'),                  # another home
    dict(shell='/bin/bash'),                   # another shell
    dict(groups=['render', 'video', 'kvm']),   # not yet a member of a device group
    dict(home=None), dict(shell=''), dict(group=None),  # not asked: never taken as wanted
])
def test_any_difference_leaves_the_tasks_in(change):
    assert ssh.account_as_wanted(Accounts(), **dict(WANTED, **change)) is False


def test_member_of_reads_the_group_database():
    assert ssh.Host().member_of('no-such-user-inferops') == []
    assert ssh.Host().group_gid('no-such-group-inferops') is None
    assert ssh.Host().group_gid(grp.getgrgid(os.getgid()).gr_name) == os.getgid()


def test_exists_counts_a_dangling_link(tmp_path):
    (tmp_path / 'unit').write_text('')
    (tmp_path / 'dangling').symlink_to(tmp_path / 'gone')
    paths = [str(tmp_path / 'unit'), str(tmp_path / 'dangling'), str(tmp_path / 'missing')]
    assert ssh.exists(ssh.Host(), paths) == dict(zip(paths, (True, True, False)))


# `systemctl show --property=ActiveState,UnitFileState -- sglang-server.service sglang-server-liveness.timer`
# on a Debian 12 systemd container host of the rolling scenario: the server enabled and running, the timer
# not installed yet (systemd still answers, with an empty UnitFileState).
SHOW = 'ActiveState=active\nUnitFileState=enabled\n\nActiveState=inactive\nUnitFileState=\n'
UNITS = ['sglang-server.service', 'sglang-server-liveness.timer']


def test_the_units_states_come_from_one_systemctl_show():
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, SHOW, ''
    assert ssh.unit_states(run, UNITS) == {'sglang-server.service': dict(active='active', enabled='enabled'),
                                           'sglang-server-liveness.timer': dict(active='inactive', enabled='')}
    assert calls == [['systemctl', 'show', '--property=ActiveState,UnitFileState', '--'] + UNITS]


def test_units_systemd_cannot_tell_have_empty_states_so_their_tasks_run():
    def failing(argv):
        return 1, '', 'System has not been booted with systemd as init system (PID 1).'
    empty = dict(active='', enabled='')
    assert ssh.unit_states(failing, UNITS) == dict((unit, empty) for unit in UNITS)
    assert ssh.parse_show('ActiveState=active\nUnitFileState=enabled\n', UNITS)[UNITS[1]] == empty
    assert ssh.unit_states(failing, []) == {}


def test_read_reports_the_paths_the_units_and_the_account(tmp_path):
    env = tmp_path / 'runtime-env.env'
    env.write_text('X=1\n')
    params = dict(release_link=None, environment_file=str(env), user='sglang', group='sglang', home='/var/lib/sglang',
                  shell='/usr/sbin/nologin', device_dir=str(tmp_path), paths=[str(env)], units=UNITS)
    result = ssh.read(Accounts(), params, check_mode=False, run=lambda argv: (0, SHOW, ''))
    assert result['account_as_wanted'] is True and result['exists'] == {str(env): True}
    assert result['units']['sglang-server.service'] == dict(active='active', enabled='enabled')
    # Without a runner (no units asked), no systemctl runs at all.
    assert ssh.read(Accounts(), dict(params, units=[]), check_mode=False)['units'] == {}
