# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every transition of the ml-env release state machine, on a real directory tree.

The releases' interpreters are a stand-in (FakeInterpreter) that answers the integrity check as
told; the last tests run FILES_CHECK with a real interpreter over a release with a RECORD.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
import venv

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.ml_env import release as mr

SITE = 'lib/python3.12/site-packages'
HOOK = [{'path': '_inferops_hook.pth', 'content': 'import os\n'}]


class FakeInterpreter:
    """run_command for Host: a release's python answers the integrity check from `damaged` and `broken`."""

    def __init__(self):
        self.damaged = {}
        self.broken = {}
        self.calls = []

    def __call__(self, argv, environ_update=None):
        self.calls.append(list(argv))
        assert argv[1:4] == ['-I', '-B', '-c'] and argv[4] == mr.FILES_CHECK
        assert environ_update == {'PYTHONNOUSERSITE': '1'}
        release = os.path.dirname(os.path.dirname(argv[0]))
        assert argv[5] == os.path.join(release, '.verified')
        if not os.path.exists(argv[0]):  # exec follows the link
            return 127, '', 'timeout: failed to run command %s: No such file or directory\n' % argv[0]
        if release in self.broken:
            return 1, '', 'Traceback (most recent call last):\n%s\n' % self.broken[release]
        return 0, json.dumps(self.damaged.get(release, [])), ''

    def checked(self):
        return [os.path.dirname(os.path.dirname(call[0])) for call in self.calls]


class Site:
    """An ml_env layout under tmp_path, and the calls the module makes."""

    def __init__(self, tmp_path):
        self.root = str(tmp_path / 'ml-env.d')
        self.path = str(tmp_path / 'ml-env')
        self.layout = mr.Layout(self.root, self.path)
        self.python = FakeInterpreter()
        self.host = mr.Host(self.python)
        self.stamp = time.time() - 1000

    def release(self, name):
        return self.layout.release(name)

    def make(self, name, verified=True, marker=None, python=True):
        """A release as a finished build leaves it; markers get increasing times (newest last made)."""
        release = self.release(name)
        os.makedirs(os.path.join(release, 'bin'), exist_ok=True)
        os.makedirs(os.path.join(release, SITE), exist_ok=True)
        if python:
            with open(os.path.join(release, 'bin', 'python'), 'w') as handle:
                handle.write('#!/bin/false\n')
        if verified:
            with open(os.path.join(release, '.verified'), 'w') as handle:
                handle.write(name + '\n' if marker is None else marker)
            self.stamp += 10
            os.utime(os.path.join(release, '.verified'), (self.stamp, self.stamp))
        return release

    def point(self, link, release):
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(release, link)

    def current(self):
        return os.readlink(self.path) if os.path.lexists(self.path) else ''

    def previous(self):
        return os.readlink(self.layout.previous_link) if os.path.lexists(self.layout.previous_link) else ''

    def releases(self):
        return sorted(os.listdir(self.layout.releases)) if os.path.isdir(self.layout.releases) else []

    def snapshot(self):
        """Everything under tmp_path with its content or link target, to prove nothing changed."""
        found = {}
        for top in (self.root, self.path):
            for base, dirs, files in os.walk(top) if os.path.isdir(top) and not os.path.islink(top) else [('', [], [])]:
                for entry in dirs + files:
                    path = os.path.join(base, entry)
                    if os.path.islink(path):
                        found[path] = 'link:' + os.readlink(path)
                    elif os.path.isfile(path):
                        with open(path) as handle:
                            found[path] = (handle.read(), os.stat(path).st_mtime)
                    else:
                        found[path] = 'dir'
            if os.path.islink(top):
                found[top] = 'link:' + os.readlink(top)
        return found

    def call(self, state='present', name='bbbbbbbbbbbb', check_mode=False, **params):
        full = dict(state=state, release=name, rollback=False, keep=3, site_packages=SITE, site_files=[], report={},
                    command_timeout=60)
        full.update(params)
        return mr.run(self.host, self.layout, full, check_mode=check_mode)


A, B, C = 'aaaaaaaaaaaa', 'bbbbbbbbbbbb', 'cccccccccccc'


@pytest.fixture
def site(tmp_path):
    return Site(tmp_path)


@pytest.fixture
def a_current(site):
    """Release A verified and current, nothing before it."""
    site.point(site.path, site.make(A))
    return site


@pytest.fixture
def b_current(site):
    """A then B: B current, A previous (what a converge after a pin change leaves)."""
    site.make(A)
    site.point(site.path, site.make(B))
    site.point(site.layout.previous_link, site.release(A))
    return site


def build(site, name, site_files=(), report=None):
    """What the role does after present said build: the venv, the site files, verification, the mark."""
    release = site.release(name)
    os.makedirs(os.path.join(release, 'bin'))
    os.makedirs(os.path.join(release, SITE))
    with open(os.path.join(release, 'bin', 'python'), 'w') as handle:
        handle.write('#!/bin/false\n')
    if site_files:
        staged = site.call('staged', name, site_files=list(site_files))
        assert staged['changed']
    return site.call('verified', name, site_files=list(site_files), report=report or {'problems': []})


# Fresh host.

def test_fresh_host_builds_then_the_verified_release_becomes_current(site):
    result = site.call()
    assert result['next'] == 'build' and result['changed']
    assert result['release'] == site.release(B) and result['current'] == '' and result['previous'] == ''
    assert result['trusted'] is False
    assert os.path.isdir(site.layout.releases) and not os.path.exists(site.release(B))
    assert site.current() == ''

    done = build(site, B, HOOK, report={'problems': [], 'stage': 'verify'})
    assert done['next'] == '' and done['release'] == site.release(B) and done['previous'] == ''
    assert site.current() == site.release(B) and site.previous() == ''
    with open(os.path.join(site.release(B), '.verified')) as handle:
        assert handle.read() == B + '\n'
    with open(os.path.join(site.release(B), '.ml_env', 'verify.json')) as handle:
        assert json.load(handle) == {'problems': [], 'stage': 'verify'}
    with open(os.path.join(site.release(B), SITE, '_inferops_hook.pth')) as handle:
        assert handle.read() == 'import os\n'
    assert oct(os.stat(os.path.join(site.release(B), '.verified')).st_mode & 0o777) == '0o644'
    assert not os.path.lexists(site.path + mr.SWITCH_SUFFIX)
    assert 'point %s at %s' % (site.path, site.release(B)) in done['actions']


def test_the_run_after_a_build_changes_nothing(site):
    site.call()
    build(site, B, HOOK)
    before = site.snapshot()
    result = site.call(site_files=HOOK)
    assert not result['changed'] and result['actions'] == [] and result['next'] == ''
    assert result['release'] == site.release(B) and result['trusted'] is True
    assert site.snapshot() == before


# Unchanged.

def test_unchanged_is_one_integrity_check_and_no_change(b_current):
    site = b_current
    before = site.snapshot()
    result = site.call(name=B)
    assert not result['changed'] and result['next'] == ''
    assert result['release'] == site.release(B) and result['previous'] == site.release(A)
    assert site.python.checked() == [site.release(B)]
    assert site.snapshot() == before


def test_a_site_file_that_changed_is_written_again_on_the_current_release(b_current):
    site = b_current
    site.call(name=B, site_files=HOOK)
    result = site.call(name=B, site_files=[{'path': HOOK[0]['path'], 'content': 'import sys\n'}])
    assert result['changed'] and result['actions'] == ['write %s' % os.path.join(site.release(B), SITE, HOOK[0]['path'])]
    with open(os.path.join(site.release(B), SITE, HOOK[0]['path'])) as handle:
        assert handle.read() == 'import sys\n'


def test_site_files_in_a_subdirectory_get_their_directory(a_current):
    site = a_current
    site.call(name=A, site_files=[{'path': 'inferops/hook.py', 'content': 'x = 1\n'}])
    assert os.path.isfile(os.path.join(site.release(A), SITE, 'inferops', 'hook.py'))


# New pins.

def test_new_pins_build_while_the_current_release_stays_then_switch(a_current):
    site = a_current
    result = site.call(name=B)
    assert result['next'] == 'build' and result['current'] == site.release(A)
    assert site.current() == site.release(A)
    done = build(site, B)
    assert done['release'] == site.release(B) and done['previous'] == site.release(A)
    assert site.current() == site.release(B) and site.previous() == site.release(A)
    # previous first, then the current link: the order a killed run must see.
    assert done['actions'][-2:] == ['point %s at %s' % (site.layout.previous_link, site.release(A)),
                                    'point %s at %s' % (site.path, site.release(B))]


def test_back_to_pins_of_a_kept_release_switches_without_building(b_current):
    site = b_current
    result = site.call(name=A)
    assert result['next'] == '' and result['changed']
    assert site.current() == site.release(A) and site.previous() == site.release(B)
    assert result['previous'] == site.release(B)


# Verification fails.

def test_a_failed_build_is_removed_and_the_current_release_stays(b_current):
    site = b_current
    assert site.call(name=C)['next'] == 'build'
    os.makedirs(os.path.join(site.release(C), 'bin'))
    result = site.call('absent', C)
    assert result['changed'] and result['actions'] == ['remove %s' % site.release(C)]
    assert not os.path.exists(site.release(C))
    assert site.current() == site.release(B) and site.previous() == site.release(A)


def test_absent_never_removes_the_current_release(b_current):
    site = b_current
    result = site.call('absent', B)
    assert not result['changed'] and os.path.isdir(site.release(B))


def test_absent_of_a_release_that_was_never_created_changes_nothing(b_current):
    assert not b_current.call('absent', C)['changed']


# A killed build.

def test_a_killed_build_of_the_release_is_not_trusted_and_its_leftover_removed(b_current):
    site = b_current
    leftover = site.make(C, verified=False)
    with open(os.path.join(leftover, 'left-by-killed-build'), 'w') as handle:
        handle.write('x')
    result = site.call(name=C)
    assert result['next'] == 'build' and result['trusted'] is False
    assert 'remove %s (never verified)' % leftover in result['actions']
    assert not os.path.exists(leftover)
    assert site.python.checked() == []


def test_a_killed_build_of_another_release_is_pruned_by_an_unchanged_run(b_current):
    site = b_current
    killed = site.make('feedfacecafe', verified=False)
    result = site.call(name=B)
    assert result['actions'] == ['remove %s' % killed]
    assert site.releases() == sorted([A, B])


def test_a_killed_rebuild_of_the_previous_release(b_current):
    # The side_effect case: B previous with its marker gone, then B's pins applied again.
    site = b_current
    site.call(name=A)
    os.remove(os.path.join(site.release(B), '.verified'))
    result = site.call(name=B)
    assert result['next'] == 'build' and not os.path.exists(site.release(B))
    done = build(site, B)
    assert site.current() == site.release(B) and site.previous() == site.release(A)
    assert done['previous'] == site.release(A) and site.releases() == sorted([A, B])


def test_a_run_killed_between_the_two_links_is_finished_by_the_next_run(a_current):
    site = a_current
    site.make(B)
    site.point(site.layout.previous_link, site.release(A))
    os.symlink(site.release(B), site.path + mr.SWITCH_SUFFIX)
    result = site.call(name=B)
    assert result['actions'] == ['point %s at %s' % (site.path, site.release(B))]
    assert site.current() == site.release(B) and site.previous() == site.release(A)
    assert not os.path.lexists(site.path + mr.SWITCH_SUFFIX)


# Rollback.

def test_rollback_switches_to_previous_and_keeps_the_replaced_one(b_current):
    site = b_current
    result = site.call(name=B, rollback=True)
    assert result['next'] == '' and result['release'] == site.release(A) and result['previous'] == site.release(B)
    assert site.current() == site.release(A) and site.previous() == site.release(B)
    assert site.python.checked() == [site.release(A)]


def test_rollback_twice_returns(b_current):
    site = b_current
    site.call(name=B, rollback=True)
    result = site.call(name=B, rollback=True)
    assert result['release'] == site.release(B) and result['previous'] == site.release(A)
    assert site.current() == site.release(B) and site.previous() == site.release(A)


def test_rollback_ignores_the_profile_release_and_prunes_killed_builds(b_current):
    site = b_current
    killed = site.make('feedfacecafe', verified=False)
    result = site.call(name='feedfacecafe', rollback=True)
    assert site.current() == site.release(A) and not os.path.exists(killed)
    assert 'remove %s' % killed in result['actions']


def test_rollback_without_a_previous_release_is_refused(a_current):
    site = a_current
    before = site.snapshot()
    with pytest.raises(mr.ReleaseError) as info:
        site.call(name=A, rollback=True)
    assert str(info.value) == ('ml_env_rollback: %s does not name a verified release (no previous release); '
                               'nothing was changed' % site.layout.previous_link)
    assert site.snapshot() == before


@pytest.mark.parametrize('marker', [None, 'cafecafecafe\n', ''])
def test_rollback_to_an_unverified_previous_release_is_refused(b_current, marker):
    site = b_current
    if marker is None:
        os.remove(os.path.join(site.release(A), '.verified'))
    else:
        with open(os.path.join(site.release(A), '.verified'), 'w') as handle:
            handle.write(marker)
    before = site.snapshot()
    with pytest.raises(mr.ReleaseError) as info:
        site.call(name=B, rollback=True)
    assert 'does not name a verified release (%s)' % site.release(A) in str(info.value)
    assert site.snapshot() == before


def test_rollback_to_a_damaged_previous_release_is_refused(b_current):
    site = b_current
    site.python.damaged[site.release(A)] = [{'name': 'six', 'version': '1.17.0', 'files': ['six.py']}]
    before = site.snapshot()
    with pytest.raises(mr.ReleaseError) as info:
        site.call(name=B, rollback=True)
    assert str(info.value) == (
        'ml_env_rollback: the previous release %s is damaged ([{"name": "six", "version": "1.17.0", "files": '
        '["six.py"]}]); nothing was changed; apply the profile it was built from to repair it' % site.release(A))
    assert site.snapshot() == before


def test_rollback_to_a_previous_release_whose_interpreter_fails_is_refused(b_current):
    site = b_current
    site.python.broken[site.release(A)] = 'ImportError: libpython3.12.so.1.0: cannot open shared object file'
    with pytest.raises(mr.ReleaseError) as info:
        site.call(name=B, rollback=True)
    assert ('the previous release %s is damaged (its interpreter does not run (rc=1): ImportError: libpython3.12.so.1.0'
            % site.release(A)) in str(info.value)


# Prune with keep N.

def many(site, names):
    """Verified releases in this order (the last is the newest), the last current, the one before previous."""
    for name in names:
        site.make(name)
    site.point(site.path, site.release(names[-1]))
    site.point(site.layout.previous_link, site.release(names[-2]))


NAMES = ['%012d' % number for number in range(1, 6)]


@pytest.mark.parametrize('keep,kept', [
    (5, NAMES),
    (3, NAMES[2:]),
    (2, NAMES[3:]),
    (1, NAMES[4:]),
])
def test_prune_keeps_current_previous_then_newest(site, keep, kept):
    many(site, NAMES)
    result = site.call(name=NAMES[-1], keep=keep)
    assert site.releases() == kept
    assert result['previous'] == (site.release(NAMES[3]) if keep > 1 else '')
    assert site.previous() == result['previous']


def test_prune_keeps_the_previous_release_over_a_newer_one(site):
    many(site, NAMES)
    # The previous release is the oldest: it still stays before the newer ones.
    site.point(site.layout.previous_link, site.release(NAMES[0]))
    site.call(name=NAMES[-1], keep=2)
    assert site.releases() == [NAMES[0], NAMES[-1]]


def test_prune_orders_by_the_marker_time_not_the_name(site):
    many(site, NAMES)
    newest = os.path.join(site.release(NAMES[0]), '.verified')
    os.utime(newest, (time.time(), time.time()))
    site.call(name=NAMES[-1], keep=3)
    assert site.releases() == [NAMES[0], NAMES[3], NAMES[4]]


def test_prune_leaves_what_is_not_a_release_directory(b_current):
    site = b_current
    with open(os.path.join(site.layout.releases, 'README'), 'w') as handle:
        handle.write('x')
    os.makedirs(os.path.join(site.layout.releases, '.hidden'))
    site.call(name=B, keep=1)
    assert site.releases() == sorted(['.hidden', 'README', B])


def test_keep_one_after_a_switch_drops_the_previous_link(b_current):
    site = b_current
    result = site.call(name=A, keep=1)
    assert site.releases() == [A] and site.previous() == '' and result['previous'] == ''
    assert site.current() == site.release(A)


# A release whose marker is damaged.

@pytest.mark.parametrize('marker', ['', 'bbbbbbbbbbbc\n', 'garbage'])
def test_a_damaged_marker_makes_a_release_untrusted(b_current, marker):
    site = b_current
    site.call(name=A)  # A current, B previous
    with open(os.path.join(site.release(B), '.verified'), 'w') as handle:
        handle.write(marker)
    result = site.call(name=B)
    assert result['next'] == 'build' and not os.path.exists(site.release(B))


@pytest.mark.parametrize('damage', ['marker', 'no-marker', 'marker-a-directory', 'no-python'])
def test_the_current_release_with_a_damaged_marker_is_not_rebuilt_in_place(b_current, damage):
    site = b_current
    marker = os.path.join(site.release(B), '.verified')
    if damage == 'marker':
        with open(marker, 'w') as handle:
            handle.write('tampered\n')
    elif damage == 'no-marker':
        os.remove(marker)
    elif damage == 'marker-a-directory':
        os.remove(marker)
        os.mkdir(marker)
    else:
        os.remove(os.path.join(site.release(B), 'bin', 'python'))
    before = site.snapshot()
    with pytest.raises(mr.ReleaseError) as info:
        site.call(name=B)
    assert str(info.value) == (
        'the current release %s has no valid verification marker (.verified); it was changed by hand: roll back or '
        'point %s elsewhere before rebuilding it' % (site.release(B), site.path))
    assert site.snapshot() == before


def test_the_current_release_whose_interpreter_fails_is_named(b_current):
    site = b_current
    site.python.broken[site.release(B)] = 'SyntaxError: bad'
    with pytest.raises(mr.ReleaseError) as info:
        site.call(name=B)
    assert str(info.value).startswith(
        'the current release %s its interpreter does not run (rc=1): SyntaxError: bad;' % site.release(B))


def test_a_dangling_interpreter_link_is_found_by_the_integrity_check(b_current):
    site = b_current
    python = os.path.join(site.release(A), 'bin', 'python')
    os.remove(python)
    os.symlink('/nonexistent/python3', python)
    site.call(name=A)  # not current: untrusted, rebuilt
    assert not os.path.exists(site.release(A))


def test_a_non_current_release_whose_interpreter_fails_is_rebuilt(b_current):
    site = b_current
    site.python.broken[site.release(A)] = 'SyntaxError: bad'
    result = site.call(name=A)
    assert result['next'] == 'build' and result['trusted'] is False and result['damaged'] == []
    assert site.current() == site.release(B)


# Repair.

DAMAGED = [{'name': 'six', 'version': '1.17.0', 'files': ['six.py']}]


def test_damaged_files_of_the_current_release_are_repaired_in_place(b_current):
    site = b_current
    site.python.damaged[site.release(B)] = DAMAGED
    before = site.snapshot()
    result = site.call(name=B)
    assert result['next'] == 'repair' and result['damaged'] == DAMAGED and result['trusted'] is True
    assert result['actions'] == ['reinstall six==1.17.0 in release %s and verify it again' % site.release(B)]
    assert site.snapshot() == before
    marker = os.path.join(site.release(B), '.verified')
    old = os.stat(marker).st_mtime
    done = site.call('verified', B, report={'problems': []})
    assert os.stat(marker).st_mtime > old
    assert done['release'] == site.release(B) and done['previous'] == site.release(A)
    assert site.current() == site.release(B)


def test_damaged_files_of_a_kept_release_are_repaired_before_it_becomes_current(b_current):
    site = b_current
    site.python.damaged[site.release(A)] = DAMAGED
    assert site.call(name=A)['next'] == 'repair'
    assert site.current() == site.release(B)
    site.call('verified', A)
    assert site.current() == site.release(A) and site.previous() == site.release(B)


# Check mode.

@pytest.mark.parametrize('case', ['build', 'switch', 'rollback', 'repair', 'prune', 'staged', 'verified', 'absent'])
def test_check_mode_changes_nothing_and_says_what_it_would_do(b_current, case):
    site = b_current
    site.make('feedfacecafe', verified=False)
    site.python.damaged[site.release(B)] = DAMAGED if case == 'repair' else []
    before = site.snapshot()
    call = {
        'build': dict(name=C), 'switch': dict(name=A), 'rollback': dict(name=B, rollback=True),
        'repair': dict(name=B), 'prune': dict(name=B, keep=1), 'staged': dict(state='staged', name=B, site_files=HOOK),
        'verified': dict(state='verified', name=A), 'absent': dict(state='absent', name='feedfacecafe'),
    }[case]
    result = site.call(check_mode=True, **call)
    assert site.snapshot() == before
    assert result['changed'] and result['actions'] and result['next'] == ''
    if case == 'build':
        assert result['actions'] == ['build and verify release %s' % site.release(C),
                                     'point %s at %s' % (site.layout.previous_link, site.release(B)),
                                     'point %s at %s' % (site.path, site.release(C))]
        assert result['release'] == site.release(C) and result['previous'] == site.release(B)
    if case == 'rollback':
        assert result['release'] == site.release(A) and result['previous'] == site.release(B)


def test_check_mode_on_a_fresh_host(site):
    result = site.call(check_mode=True)
    assert result['actions'] == ['build and verify release %s' % site.release(B),
                                 'point %s at %s' % (site.path, site.release(B))]
    assert not os.path.exists(site.root)


# Options.

@pytest.mark.parametrize('change,problem', [
    (dict(release='../x'), 'release "../x" is not a plain file name'),
    (dict(release='.verified'), 'is not a plain file name'),
    (dict(release=''), 'is not a plain file name'),
    (dict(keep=0), 'keep must be at least 1 (got 0)'),
    (dict(site_files=[{'path': '../escape.pth', 'content': ''}]), 'site_files path "../escape.pth" must be a relative'),
    (dict(site_files=[{'path': '/abs.pth', 'content': ''}]), 'must be a relative path'),
    (dict(site_packages='/usr/lib/python3/dist-packages'), 'site_packages "/usr/lib/python3/dist-packages" must be'),
    (dict(site_packages='', site_files=HOOK), 'site_files need site_packages'),
    (dict(path='/opt/ml-env.d/'), 'path and root must differ'),
])
def test_option_problems(change, problem):
    params = dict(state='present', root='/opt/ml-env.d', path='/opt/ml-env', release=A, rollback=False, keep=3,
                  site_packages=SITE, site_files=[], report={}, command_timeout=60)
    params.update(change)
    assert any(problem in item for item in mr.option_problems(params)), mr.option_problems(params)


def test_good_options_have_no_problem():
    params = dict(state='present', root='/opt/ml-env.d', path='/opt/ml-env', release=A, rollback=False, keep=1,
                  site_packages=SITE, site_files=HOOK, report={}, command_timeout=60)
    assert mr.option_problems(params) == []


def test_describe_names_links_and_releases(b_current):
    text = mr.describe(b_current.host, b_current.layout)
    assert text == '%s -> %s\n%s -> %s\nreleases: %s, %s\n' % (
        b_current.path, b_current.release(B), b_current.layout.previous_link, b_current.release(A), A, B)


# FILES_CHECK with a real interpreter.

def record_hash(data):
    return 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()


@pytest.fixture
def real_release(tmp_path):
    """A venv release holding one distribution with a RECORD, marked verified, as a real Host sees it."""
    root = tmp_path / 'ml-env.d'
    release = root / 'releases' / A
    venv.EnvBuilder(with_pip=False, symlinks=True).create(str(release))
    site_packages = subprocess.check_output(
        [str(release / 'bin' / 'python'), '-I', '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
        universal_newlines=True).strip()
    files = {'demo/__init__.py': b'VERSION = "1.0"\n', 'demo/data.txt': b'0123456789\n'}
    dist_info = os.path.join(site_packages, 'demo-1.0.dist-info')
    os.makedirs(dist_info)
    for name, data in files.items():
        os.makedirs(os.path.dirname(os.path.join(site_packages, name)), exist_ok=True)
        with open(os.path.join(site_packages, name), 'wb') as handle:
            handle.write(data)
    with open(os.path.join(dist_info, 'METADATA'), 'w') as handle:
        handle.write('Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n')
    with open(os.path.join(dist_info, 'RECORD'), 'w') as handle:
        for name, data in files.items():
            handle.write('%s,%s,%d\n' % (name, record_hash(data), len(data)))
        handle.write('demo-1.0.dist-info/METADATA,,\ndemo-1.0.dist-info/RECORD,,\n')
    marker = release / '.verified'
    marker.write_text(A + '\n')
    past = time.time() - 100
    os.utime(str(marker), (past, past))
    for name in files:
        os.utime(os.path.join(site_packages, name), (past - 10, past - 10))

    def run_command(argv, environ_update=None):
        env = dict(os.environ, **(environ_update or {}))
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60,
                              universal_newlines=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    return mr.Host(run_command), str(release), site_packages


def test_files_check_finds_nothing_in_an_intact_release(real_release):
    host, release, dummy = real_release
    assert host.integrity(release) == ([], '')


def test_files_check_finds_a_file_of_another_size(real_release):
    host, release, site_packages = real_release
    with open(os.path.join(site_packages, 'demo', 'data.txt'), 'a') as handle:
        handle.write('more\n')
    assert host.integrity(release) == ([{'name': 'demo', 'version': '1.0', 'files': ['demo/data.txt']}], '')


def test_files_check_hashes_a_file_changed_after_the_marker(real_release):
    host, release, site_packages = real_release
    with open(os.path.join(site_packages, 'demo', 'data.txt'), 'w') as handle:
        handle.write('9876543210\n')  # the same size
    assert host.integrity(release) == ([{'name': 'demo', 'version': '1.0', 'files': ['demo/data.txt']}], '')


def test_files_check_does_not_hash_files_older_than_the_marker(real_release):
    host, release, site_packages = real_release
    path = os.path.join(site_packages, 'demo', 'data.txt')
    stamp = os.stat(path).st_mtime
    with open(path, 'w') as handle:
        handle.write('9876543210\n')
    os.utime(path, (stamp, stamp))
    assert host.integrity(release) == ([], '')


def test_files_check_finds_a_missing_file(real_release):
    host, release, site_packages = real_release
    os.remove(os.path.join(site_packages, 'demo', '__init__.py'))
    assert host.integrity(release) == ([{'name': 'demo', 'version': '1.0', 'files': ['demo/__init__.py']}], '')


def test_files_check_ignores_the_hosts_distributions(real_release):
    # The release's interpreter sees the host's site-packages only through system site packages;
    # pyvenv.cfg says false here, and the check reads the release's own distributions anyway.
    host, release, dummy = real_release
    damaged, broken = host.integrity(release)
    assert broken == '' and all(item['name'] == 'demo' for item in damaged)


def test_an_interpreter_that_does_not_start_is_broken(real_release):
    host, release, dummy = real_release
    os.remove(os.path.join(release, 'pyvenv.cfg'))
    python = os.path.join(release, 'bin', 'python')
    os.remove(python)
    with open(python, 'w') as handle:
        handle.write('#!/bin/sh\necho "error while loading shared libraries: libpython" >&2\nexit 127\n')
    os.chmod(python, 0o755)
    assert host.integrity(release) == ([], 'its interpreter does not run (rc=127): error while loading shared '
                                           'libraries: libpython')


def test_a_real_release_goes_through_plan(real_release, tmp_path):
    host, release, dummy = real_release
    layout = mr.Layout(str(tmp_path / 'ml-env.d'), str(tmp_path / 'ml-env'))
    state = mr.plan(host, layout, A)
    assert state['trusted'] and state['next'] == '' and state['target'] == release
    assert sys.executable  # the venv was made from the interpreter running the tests


def test_a_real_directory_at_path_is_refused(site):
    site.make(B)
    os.makedirs(site.path)
    with pytest.raises(mr.ReleaseError) as info:
        site.call(name=B)
    assert str(info.value).startswith('%s exists and is not a symlink' % site.path)
    assert os.path.isdir(site.path) and not os.path.islink(site.path)
