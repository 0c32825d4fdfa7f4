# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The toolkit's ld.so.conf.d file: the decisions (plan) and a run on a real directory."""

from __future__ import annotations

import os

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.cuda_toolkit import ldconfig as ctl

CONTENT = '#\n# Ansible managed\n#\n# CUDA 13.0 (wheels), role inferops.gpu.cuda_toolkit\n/usr/local/cuda-13.0/lib64\n'
DATA = CONTENT.encode()
OWNER = (0, 0)
CONF = dict(mode=0o644, uid=0, gid=0, mtime=100.0)


def cache(mtime):
    return dict(mode=0o644, uid=0, gid=0, mtime=mtime)


# others

def test_others_match_the_pattern_except_the_file_itself():
    names = ['40-inferops-cuda-13-0.conf', '50-inferops-cuda-13-0.conf', '50-inferops-cuda-12-8.conf', 'libc.conf']
    assert ctl.others('/etc/ld.so.conf.d/50-inferops-cuda-13-0.conf', names, '*-inferops-cuda-13-0.conf') == [
        '/etc/ld.so.conf.d/40-inferops-cuda-13-0.conf']


def test_no_pattern_removes_nothing():
    assert ctl.others('/etc/ld.so.conf.d/50-x.conf', ['40-x.conf'], None) == []


# plan

def test_nothing_to_do_when_file_and_cache_are_current():
    assert ctl.plan(DATA, CONF, DATA, OWNER, [], cache(200.0)) == dict(
        write=False, set_attributes=False, remove=[], ldconfig=False)


def test_a_missing_file_is_written_and_ldconfig_runs():
    assert ctl.plan(None, None, DATA, OWNER, [], cache(200.0)) == dict(
        write=True, set_attributes=False, remove=[], ldconfig=True)


def test_other_bytes_are_rewritten():
    steps = ctl.plan(DATA + b'/usr/local/cuda-13.0/extras/CUPTI/lib64\n', CONF, DATA, OWNER, [], cache(200.0))
    assert steps['write'] and steps['ldconfig']


@pytest.mark.parametrize('found', [dict(CONF, mode=0o600), dict(CONF, uid=1000), dict(CONF, gid=1000)])
def test_wrong_owner_or_mode_is_set_without_rewriting(found):
    steps = ctl.plan(DATA, found, DATA, OWNER, [], cache(200.0))
    assert steps['set_attributes'] and not steps['write'] and steps['ldconfig']


def test_another_order_is_removed_and_ldconfig_runs():
    steps = ctl.plan(DATA, CONF, DATA, OWNER, ['/etc/ld.so.conf.d/40-x.conf'], cache(200.0))
    assert steps == dict(write=False, set_attributes=False, remove=['/etc/ld.so.conf.d/40-x.conf'], ldconfig=True)


def test_a_cache_older_than_the_file_is_rebuilt():
    assert ctl.plan(DATA, CONF, DATA, OWNER, [], cache(99.5))['ldconfig']


def test_a_missing_cache_is_rebuilt():
    assert ctl.plan(DATA, CONF, DATA, OWNER, [], None)['ldconfig']


# run, on a real directory (owned by whoever runs the tests)

class Recorder:
    def __init__(self, rc=0):
        self.calls = 0
        self.rc = rc

    def __call__(self):
        self.calls += 1
        return self.rc, '', 'ldconfig: boom\n' if self.rc else ''


@pytest.fixture
def tree(tmp_path):
    confd = tmp_path / 'ld.so.conf.d'
    confd.mkdir()
    return dict(dir=confd, path=str(confd / '50-inferops-cuda-13-0.conf'), cache=str(tmp_path / 'ld.so.cache'),
                files=ctl.Files(os.getuid(), os.getgid()))


def params(tree, **extra):
    return dict(dict(path=tree['path'], content=CONTENT, replaces='*-inferops-cuda-13-0.conf', cache=tree['cache']),
                **extra)


def set_mtime(path, mtime):
    os.utime(path, (mtime, mtime))


def test_first_run_writes_removes_and_runs_ldconfig(tree):
    older = tree['dir'] / '40-inferops-cuda-13-0.conf'
    older.write_text('/usr/local/cuda-13.0/lib64\n')
    (tree['dir'] / '50-inferops-cuda-12-8.conf').write_text('/usr/local/cuda-12.8/lib64\n')
    ldconfig = Recorder()
    result = ctl.run(tree['files'], ldconfig, params(tree))
    assert result['changed'] and result['conf_changed'] and result['ldconfig_ran']
    assert result['removed'] == [str(older)] and not older.exists()
    assert (tree['dir'] / '50-inferops-cuda-12-8.conf').exists()
    with open(tree['path'], 'rb') as handle:
        assert handle.read() == DATA
    assert os.stat(tree['path']).st_mode & 0o777 == 0o644
    assert sorted(os.listdir(str(tree['dir']))) == ['50-inferops-cuda-12-8.conf', '50-inferops-cuda-13-0.conf']
    assert ldconfig.calls == 1
    assert result['diff'] == dict(before_header=tree['path'], after_header=tree['path'], before='', after=CONTENT)


def test_second_run_changes_nothing_and_keeps_the_inode(tree):
    ctl.run(tree['files'], Recorder(), params(tree))
    with open(tree['cache'], 'w') as handle:
        handle.write('cache')
    set_mtime(tree['path'], 1000)
    set_mtime(tree['cache'], 2000)
    inode = os.stat(tree['path']).st_ino
    ldconfig = Recorder()
    result = ctl.run(tree['files'], ldconfig, params(tree))
    assert not result['changed'] and result['removed'] == [] and not result['ldconfig_ran']
    assert ldconfig.calls == 0 and os.stat(tree['path']).st_ino == inode and os.stat(tree['path']).st_mtime == 1000


def test_a_run_stopped_before_ldconfig_is_finished(tree):
    ctl.run(tree['files'], Recorder(), params(tree))
    with open(tree['cache'], 'w') as handle:
        handle.write('cache')
    set_mtime(tree['cache'], 1000)
    set_mtime(tree['path'], 2000)
    ldconfig = Recorder()
    result = ctl.run(tree['files'], ldconfig, params(tree))
    assert result['changed'] and not result['conf_changed'] and result['ldconfig_ran'] and ldconfig.calls == 1


def test_wrong_mode_is_set(tree):
    ctl.run(tree['files'], Recorder(), params(tree))
    os.chmod(tree['path'], 0o600)
    result = ctl.run(tree['files'], Recorder(), params(tree))
    assert result['conf_changed'] and os.stat(tree['path']).st_mode & 0o777 == 0o644


def test_check_mode_changes_nothing(tree):
    older = tree['dir'] / '40-inferops-cuda-13-0.conf'
    older.write_text('old\n')
    ldconfig = Recorder()
    result = ctl.run(tree['files'], ldconfig, params(tree), check_mode=True)
    assert result['changed'] and result['conf_changed'] and result['ldconfig_ran']
    assert result['removed'] == [str(older)] and older.exists()
    assert not os.path.exists(tree['path']) and ldconfig.calls == 0


def test_diff_shows_the_old_content(tree):
    with open(tree['path'], 'w') as handle:
        handle.write('/opt/old/lib64\n')
    result = ctl.run(tree['files'], Recorder(), params(tree), check_mode=True)
    assert result['diff']['before'] == '/opt/old/lib64\n' and result['diff']['after'] == CONTENT


def test_ldconfig_failing_raises(tree):
    with pytest.raises(OSError) as info:
        ctl.run(tree['files'], Recorder(rc=1), params(tree))
    assert 'ldconfig failed (rc=1): ldconfig: boom' in str(info.value)


def test_a_failed_write_leaves_no_temp_file(tree, monkeypatch):
    def refuse(*args):
        raise PermissionError('not root')

    monkeypatch.setattr(os, 'fchown', refuse)
    with pytest.raises(OSError):
        ctl.run(tree['files'], Recorder(), params(tree))
    assert os.listdir(str(tree['dir'])) == []
