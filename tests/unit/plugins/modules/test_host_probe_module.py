# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""host_probe as Ansible calls it: documentation against the spec and the result, check mode, bad shapes."""

from __future__ import annotations

import sys

import pytest
import yaml

from module_harness import assert_options_match_spec, invoke, patch_exits, record_argument_spec
from ansible_collections.inferops.gpu.plugins.modules import host_probe


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    patch_exits(monkeypatch)


def args(tmp_path, **extra):
    (tmp_path / 'pins.json').write_text('{}')
    return dict(dict(stats=dict(python=dict(path=sys.executable), here=dict(path=str(tmp_path), follow=False)),
                     commands=dict(version=dict(argv=[sys.executable, '-I', '-c', 'print(42)'], stat='python')),
                     files=dict(pins=str(tmp_path / 'pins.json'))), **extra)


def test_documentation_matches_the_argument_spec_and_the_result(monkeypatch, tmp_path):
    seen = record_argument_spec(monkeypatch, host_probe)
    result = invoke(host_probe, args(tmp_path))
    assert_options_match_spec(host_probe, seen)
    assert set(yaml.safe_load(host_probe.RETURN)) | {'changed'} == set(result)
    assert result['commands']['version'] == {'rc': 0, 'stdout': '42', 'stderr': ''}
    assert result['stats']['here']['stat']['isdir'] is True and result['files']['pins'] == {'content': 'e30='}
    assert result['check_mode'] is False and result['changed'] is False


def test_check_mode_reads_the_same_and_says_so(tmp_path):
    result = invoke(host_probe, dict(args(tmp_path), _ansible_check_mode=True))
    assert result['check_mode'] is True and result['commands']['version']['stdout'] == '42'


@pytest.mark.parametrize('bad, message', [
    (dict(stats=dict(python='/usr/bin/python3')), 'stats.python must be a mapping'),
    (dict(stats=dict(python=dict(path='/x', follow='yes'))), 'stats.python must be a mapping'),
    (dict(commands=dict(version=dict(argv='python3 -V', stat='python'))), 'commands.version must be a mapping'),
    (dict(commands=dict(version=dict(argv=['/usr/bin/python3'], stat='nope'))), 'stat (a name of stats)'),
    (dict(files=dict(pins=['/a'])), 'files.pins must be a path'),
    (dict(command_timeout=0), 'command_timeout must be at least 1'),
])
def test_a_bad_shape_is_refused_before_anything_runs(tmp_path, bad, message):
    result = invoke(host_probe, dict(args(tmp_path), **bad))
    assert result['failed'] and message in result['msg']
