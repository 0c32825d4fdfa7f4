# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""host_probe: the answers a role's input checks judge, in the shapes of the stat, command and slurp
modules whose recorded results the bad-input tables carry, on real directory trees."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils._common import host_probe as hp
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env import validate as ml_env_input
from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import BoundedRunner

TIMEOUT = '/usr/bin/timeout'


def real_run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_a_missing_path_an_empty_one_a_file_a_directory_and_a_link(tmp_path):
    host = hp.Host()
    (tmp_path / 'file').write_text('x')
    (tmp_path / 'link').symlink_to(tmp_path / 'file')
    assert hp.stat_path(host, str(tmp_path / 'missing')) == {'stat': {'exists': False}}
    assert hp.stat_path(host, '') == {'skipped': True}
    assert hp.stat_path(host, str(tmp_path / 'file'))['stat'] == dict(exists=True, isreg=True, isdir=False, islnk=False,
                                                                      executable=False)
    assert hp.stat_path(host, str(tmp_path))['stat']['isdir'] is True
    # follow: the target; not following: the link itself, with its real target as the stat module names it.
    assert hp.stat_path(host, str(tmp_path / 'link'), follow=True)['stat']['isreg'] is True
    link = hp.stat_path(host, str(tmp_path / 'link'), follow=False)['stat']
    assert link['islnk'] is True and link['isreg'] is False and link['lnk_source'] == str(tmp_path / 'file')


def test_a_command_runs_only_for_an_executable_file_at_an_absolute_path(tmp_path):
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, '3.11\n', ''
    host = hp.Host()
    python = hp.stat_path(host, sys.executable)
    assert hp.run_probe(run, [sys.executable, '-c', 'x'], python) == {'rc': 0, 'stdout': '3.11', 'stderr': ''}
    for argv, stat in (([sys.executable], hp.stat_path(host, str(tmp_path / 'missing'))),  # no such file
                       (['/usr/bin'], hp.stat_path(host, '/usr/bin')),                     # a directory
                       (['python3'], python),                                               # a relative path
                       (['x'], None), ([], python)):
        assert hp.run_probe(run, argv, stat) == {'skipped': True}
    assert len(calls) == 1


def test_files_read_as_slurp_gives_them(tmp_path):
    (tmp_path / 'pins.json').write_bytes(b'{"lock": "abc"}\n')
    assert hp.read_file(hp.Host(), str(tmp_path / 'pins.json')) == {
        'content': base64.b64encode(b'{"lock": "abc"}\n').decode()}
    missing = hp.read_file(hp.Host(), str(tmp_path / 'none.json'))
    assert missing['failed'] is True and 'none.json' in missing['msg'] and 'content' not in missing


def probe_ml_env(tmp_path, interpreter, ml_env_path, uv=''):
    """ml_env's validate.yml call, through the real timeout(1) and interpreter."""
    run = BoundedRunner(real_run, TIMEOUT, 60)
    params = dict(stats=dict(python=dict(path=interpreter), ml_env_path=dict(path=ml_env_path, follow=False),
                             uv=dict(path=uv), ca_bundle=dict(path='')),
                  commands=dict(python_version=dict(argv=[interpreter, '-I', '-c',
                                                          "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
                                                    stat='python')),
                  files=dict(pins=os.path.join(ml_env_path, '.ml_env', 'pins.json')))
    return hp.probe(hp.Host(), run, params, check_mode=False)


@pytest.mark.skipif(not os.path.exists(TIMEOUT), reason='needs coreutils timeout(1)')
def test_the_ml_env_checks_judge_the_probe_as_they_judged_the_modules_answers(tmp_path):
    """The answers feed plugins/module_utils/ml_env/validate.py's checks unchanged: a real Python passes, /bin/true
    is not Python (rc 0, printed nothing), a directory is no executable file, a missing uv is refused, a real
    directory at ml_env_path is refused (the table's on-host cases, here through the probe)."""
    values = dict(ml_env_python_interpreter=sys.executable, ml_env_path=str(tmp_path / 'ml-env'),
                  ml_env_root=str(tmp_path / 'ml-env.d'), ml_env_uv_path='', inventory_hostname='node')
    (tmp_path / 'ml-env').mkdir()

    def verdict(result, check, **more):
        probes = {'python_stat': result['stats']['python'], 'python_run': result['commands']['python_version'],
                  'path_stat': result['stats']['ml_env_path'], 'uv_stat': result['stats']['uv']}
        return check(dict(values, **more), probes)

    good = probe_ml_env(tmp_path, sys.executable, str(tmp_path / 'ml-env'))
    assert good['commands']['python_version']['stdout'] == '%d.%d' % sys.version_info[:2]
    assert verdict(good, ml_env_input.check_python_interpreter) == []
    assert 'is not a symlink' in verdict(good, ml_env_input.check_path)[0]
    true = probe_ml_env(tmp_path, '/bin/true', str(tmp_path / 'ml-env'))
    assert 'did not run as Python 3 (rc=0): it printed ""' in verdict(
        true, ml_env_input.check_python_interpreter, ml_env_python_interpreter='/bin/true')[0]
    directory = probe_ml_env(tmp_path, '/usr/bin', str(tmp_path / 'ml-env'))
    assert directory['commands']['python_version'] == {'skipped': True}
    assert 'is not an executable file' in verdict(directory, ml_env_input.check_python_interpreter,
                                                  ml_env_python_interpreter='/usr/bin')[0]
    uv = probe_ml_env(tmp_path, sys.executable, str(tmp_path / 'ml-env'), uv=str(tmp_path / 'no-uv'))
    assert 'an executable uv' in verdict(uv, ml_env_input.check_uv_path, ml_env_uv_path=str(tmp_path / 'no-uv'))[0]
    assert good['files']['pins']['failed'] is True


def test_probe_reports_check_mode_and_changes_nothing(tmp_path):
    result = hp.probe(hp.Host(), None, dict(stats=dict(here=dict(path=str(tmp_path)))), check_mode=True)
    assert result == dict(changed=False, check_mode=True, stats={'here': hp.stat_path(hp.Host(), str(tmp_path))},
                          commands={}, files={})
