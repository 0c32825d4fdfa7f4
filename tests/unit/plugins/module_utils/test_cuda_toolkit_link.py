# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The default toolkit link: the decisions (plan_*) and the steps on a real directory tree."""

from __future__ import annotations

import os

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.cuda_toolkit import link as ctl

ABSENT = dict(state='absent', src='', resolved='')
C128, C130 = '/usr/local/cuda-12.8', '/usr/local/cuda-13.0'


def link(src, resolved=None):
    return dict(state='link', src=src, resolved=resolved or src)


# plan_link

def test_link_absent_is_created():
    assert ctl.plan_link('/usr/local/cuda', ABSENT, C130) == [('link', C130)]


def test_link_already_there_is_left():
    assert ctl.plan_link('/usr/local/cuda', link(C130), C130) == []


def test_link_elsewhere_is_replaced():
    assert ctl.plan_link('/usr/local/cuda', link(ctl.ALTERNATIVES_LINK, C128), C130) == [('link', C130)]


@pytest.mark.parametrize('state', ['directory', 'file'])
def test_a_directory_or_file_is_never_replaced(state):
    with pytest.raises(ValueError) as info:
        ctl.plan_link('/usr/local/cuda', dict(state=state, src='', resolved=''), C130)
    assert str(info.value) == ('/usr/local/cuda is a %s, not a symlink; move it away to let the role manage the '
                               'default link' % state)


# plan_restore

def test_restore_nothing_moved():
    assert ctl.plan_restore('/usr/local/cuda', link(C128), C128, C130, None) == []


def test_restore_no_link_before_and_none_now():
    assert ctl.plan_restore('/usr/local/cuda', ABSENT, '', C130, None) == []


def test_restore_no_link_before_drops_the_installers_link_and_alternative():
    now = link(ctl.ALTERNATIVES_LINK, C130)
    assert ctl.plan_restore('/usr/local/cuda', now, '', C130, None) == [('remove_alternative', C130), ('remove_link',)]


def test_restore_through_the_alternatives_when_the_old_one_is_registered():
    now = link(ctl.ALTERNATIVES_LINK, C130)
    assert ctl.needs_alternatives(now, C128)
    assert ctl.plan_restore('/usr/local/cuda', now, C128, C130, [C128, C130]) == [('set_alternative', C128)]


def test_restore_directly_when_the_old_one_is_not_an_alternative():
    now = link(ctl.ALTERNATIVES_LINK, C130)
    assert ctl.plan_restore('/usr/local/cuda', now, C128, C130, [C130]) == [('link', C128)]


def test_restore_a_runfiles_direct_link():
    now = link(C130)
    assert not ctl.needs_alternatives(now, C128)
    assert ctl.plan_restore('/usr/local/cuda', now, C128, C130, None) == [('link', C128)]


def test_restore_a_link_an_installer_removed():
    assert ctl.plan_restore('/usr/local/cuda', ABSENT, C128, C130, None) == [('link', C128)]


def test_restore_refuses_a_directory_now_there():
    with pytest.raises(ValueError) as info:
        ctl.plan_restore('/usr/local/cuda', dict(state='directory', src='', resolved=''), C128, C130, None)
    assert 'is a directory, not a symlink; it resolved to %s before installing' % C128 in str(info.value)


def test_parse_alternatives():
    assert ctl.parse_alternatives('/usr/local/cuda-12.8\n/usr/local/cuda-13.0\n\n') == [C128, C130]


# run() on a real tree.

class FakeAlternatives:
    """update-alternatives over a tree: the registered paths and the link in `alternatives`."""

    def __init__(self, tmp_path, registered):
        self.registered = list(registered)
        self.alt_link = str(tmp_path / 'alternatives-cuda')
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv[1:])
        if argv[1] == '--list':
            return (0, ''.join(path + '\n' for path in self.registered), '') if self.registered else (2, '', 'no alternatives')
        if argv[1] == '--set':
            if argv[3] not in self.registered:
                return 2, '', 'alternative %s for cuda not registered' % argv[3]
            os.remove(self.alt_link)
            os.symlink(argv[3], self.alt_link)
            return 0, '', ''
        if argv[1] == '--remove':
            if argv[3] in self.registered:
                self.registered.remove(argv[3])
            return 0, '', ''
        raise AssertionError(argv)


@pytest.fixture
def tree(tmp_path):
    for version in ('cuda-12.8', 'cuda-13.0'):
        (tmp_path / version).mkdir()
    return tmp_path


def params(tree, **more):
    values = dict(path=str(tree / 'cuda'), state='present', src=str(tree / 'cuda-13.0'), previous='',
                  home=str(tree / 'cuda-13.0'))
    values.update(more)
    return values


def test_run_creates_the_link_and_reports_the_diff(tree):
    host = ctl.Host(FakeAlternatives(tree, []), '/usr/bin/update-alternatives')
    result = ctl.run(host, params(tree))
    assert result['changed'] and os.readlink(str(tree / 'cuda')) == str(tree / 'cuda-13.0')
    assert result['diff'] == {'before': {'path': str(tree / 'cuda'), 'state': 'absent'},
                              'after': {'path': str(tree / 'cuda'), 'state': 'link', 'src': str(tree / 'cuda-13.0')}}
    assert not ctl.run(host, params(tree))['changed']


def test_run_in_check_mode_predicts_the_link(tree):
    host = ctl.Host(FakeAlternatives(tree, []), '/usr/bin/update-alternatives')
    result = ctl.run(host, params(tree), check_mode=True)
    assert result['changed'] and not os.path.lexists(str(tree / 'cuda'))
    assert result['diff']['before']['state'] == 'absent' and result['diff']['after']['state'] == 'link'
    assert result['diff']['after']['path'] == str(tree / 'cuda')


def test_run_restores_through_the_alternatives(tree):
    alternatives = FakeAlternatives(tree, [str(tree / 'cuda-12.8'), str(tree / 'cuda-13.0')])
    os.symlink(str(tree / 'cuda-13.0'), alternatives.alt_link)
    os.symlink(alternatives.alt_link, str(tree / 'cuda'))
    host = ctl.Host(alternatives, '/usr/bin/update-alternatives')
    # The real alternatives link is /etc/alternatives/cuda: read the tree's one as if it were.

    def read(path):
        return dict(ctl.read_link(path), src=ctl.ALTERNATIVES_LINK)

    result = ctl.run(host, params(tree, state='restored', previous=str(tree / 'cuda-12.8')), read=read)
    assert result['actions'] == ['update-alternatives --set cuda %s' % (tree / 'cuda-12.8')]
    assert os.path.realpath(str(tree / 'cuda')) == str(tree / 'cuda-12.8')
    assert os.readlink(str(tree / 'cuda')) == alternatives.alt_link


def test_run_restores_a_runfiles_link_directly(tree):
    os.symlink(str(tree / 'cuda-13.0'), str(tree / 'cuda'))
    host = ctl.Host(FakeAlternatives(tree, []), None)
    result = ctl.run(host, params(tree, state='restored', previous=str(tree / 'cuda-12.8')))
    assert result['changed'] and os.readlink(str(tree / 'cuda')) == str(tree / 'cuda-12.8')
    assert not os.path.lexists(str(tree / 'cuda') + '.inferops-tmp')


def test_run_removes_the_installers_link_when_there_was_none(tree):
    alternatives = FakeAlternatives(tree, [str(tree / 'cuda-13.0')])
    os.symlink(str(tree / 'cuda-13.0'), str(tree / 'cuda'))
    host = ctl.Host(alternatives, '/usr/bin/update-alternatives')
    result = ctl.run(host, params(tree, state='restored', previous=''))
    assert result['changed'] and not os.path.lexists(str(tree / 'cuda'))
    assert alternatives.registered == [] and result['state'] == 'absent'


def test_run_restore_in_check_mode_changes_nothing(tree):
    os.symlink(str(tree / 'cuda-13.0'), str(tree / 'cuda'))
    host = ctl.Host(FakeAlternatives(tree, []), None)
    result = ctl.run(host, params(tree, state='restored', previous=''), check_mode=True)
    assert result['changed'] and os.readlink(str(tree / 'cuda')) == str(tree / 'cuda-13.0')
    assert result['diff']['after'] == {'path': str(tree / 'cuda'), 'state': 'absent'}


def test_run_restore_unchanged(tree):
    os.symlink(str(tree / 'cuda-12.8'), str(tree / 'cuda'))
    host = ctl.Host(FakeAlternatives(tree, []), None)
    assert not ctl.run(host, params(tree, state='restored', previous=str(tree / 'cuda-12.8')))['changed']
