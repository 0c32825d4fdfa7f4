# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""cuda_toolkit_ldconfig as Ansible calls it: documentation against the spec, results, failures.

A stand-in ldconfig on PATH records its runs; real run_command, real timeout(1).
"""

from __future__ import annotations

import os
import shutil
import time

import pytest
import yaml

from module_harness import assert_documented, assert_options_match_spec, invoke, patch_exits, record_argument_spec
from ansible_collections.inferops.gpu.plugins.modules import cuda_toolkit_ldconfig

pytestmark = pytest.mark.skipif(not shutil.which('timeout'), reason='needs timeout(1)')
CONTENT = '# CUDA 13.0\n/usr/local/cuda-13.0/lib64\n'


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    patch_exits(monkeypatch)


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A conf dir, a cache path and a stand-in ldconfig that appends to a log."""
    confd = tmp_path / 'ld.so.conf.d'
    confd.mkdir()
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    log = tmp_path / 'ldconfig.log'
    ldconfig = bindir / 'ldconfig'
    ldconfig.write_text('#!/bin/sh\necho ran >> %s\n' % log)
    ldconfig.chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (bindir, os.environ.get('PATH', '')))
    # The file is given to root; the tests need not run as root.
    owners = []
    monkeypatch.setattr(os, 'fchown', lambda fd, uid, gid: owners.append((uid, gid)))
    return dict(dir=confd, path=str(confd / '50-inferops-cuda-13-0.conf'), cache=str(tmp_path / 'ld.so.cache'),
                log=log, ldconfig=ldconfig, owners=owners)


def args(host, **extra):
    return dict(dict(path=host['path'], content=CONTENT, replaces='*-inferops-cuda-13-0.conf', cache=host['cache']),
                **extra)


def runs(host):
    return len(host['log'].read_text().splitlines()) if host['log'].exists() else 0


def test_documentation_matches_the_argument_spec(monkeypatch, host):
    seen = record_argument_spec(monkeypatch, cuda_toolkit_ldconfig)
    (host['dir'] / '40-inferops-cuda-13-0.conf').write_text('old\n')
    result = invoke(cuda_toolkit_ldconfig, args(host))
    assert_options_match_spec(cuda_toolkit_ldconfig, seen)
    returns = yaml.safe_load(cuda_toolkit_ldconfig.RETURN)
    for key in returns:
        assert_documented(result[key], returns[key], key)
    assert result['changed'] and result['conf_changed'] and result['ldconfig_ran']
    assert result['removed'] == [str(host['dir'] / '40-inferops-cuda-13-0.conf')]
    assert runs(host) == 1 and host['owners'] == [(0, 0)]
    with open(host['path']) as handle:
        assert handle.read() == CONTENT


def test_second_run_is_a_no_op(host):
    invoke(cuda_toolkit_ldconfig, args(host))
    with open(host['cache'], 'w') as handle:
        handle.write('cache')
    os.utime(host['path'], (1000, 1000))
    result = invoke(cuda_toolkit_ldconfig, args(host))
    assert not result['changed'] and not result['ldconfig_ran'] and result['removed'] == []
    assert runs(host) == 1


def test_check_mode_with_diff(host):
    result = invoke(cuda_toolkit_ldconfig, args(host, _ansible_check_mode=True, _ansible_diff=True))
    assert result['changed'] and result['ldconfig_ran'] and not os.path.exists(host['path']) and runs(host) == 0
    assert result['diff']['before'] == '' and result['diff']['after'] == CONTENT


def test_ldconfig_failing_fails_the_module(host):
    host['ldconfig'].write_text('#!/bin/sh\necho "ldconfig: cannot open" >&2\nexit 1\n')
    result = invoke(cuda_toolkit_ldconfig, args(host))
    assert result['failed'] and 'ldconfig failed (rc=1): ldconfig: cannot open' in result['msg']


def test_ldconfig_is_killed_at_command_timeout(host):
    host['ldconfig'].write_text('#!/bin/sh\nexec sleep 300\n')
    started = time.monotonic()
    result = invoke(cuda_toolkit_ldconfig, args(host, command_timeout=1))
    assert result['failed'] and 'within 1 s' in result['msg'] and 'command_timeout' in result['msg']
    assert time.monotonic() - started < 5
