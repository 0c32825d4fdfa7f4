# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The dynamic loader's variables in runtime_env's checks (issue 41), where tests/bad_inputs/runtime_env.yml
does not pin them: how the loader splits each variable, numbers, the probe's absent or skipped answers,
links, the venv made later in the run, one message per variable."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import validate as rt
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import run_checks

from runtime_env_values import DEFAULTS  # tests/unit/runtime_env_values.py

FILE = {'stat': {'exists': True, 'isreg': True, 'isdir': False, 'islnk': False, 'executable': False}}
DIRECTORY = {'stat': {'exists': True, 'isreg': False, 'isdir': True, 'islnk': False, 'executable': True}}
MISSING_FILE = {'stat': {'exists': False}}


def problems(extra, probes=None, **changes):
    values = dict(DEFAULTS, runtime_env_extra_vars=extra, **changes)
    assert set(values) == set(rt.NAMES)
    return run_checks(rt.CHECKS, values, probes)


def probed(files, venv=None):
    return {'loader_files': files, 'venv': DIRECTORY if venv is None else venv}


@pytest.mark.parametrize('value', [
    '/usr/lib/libjemalloc.so.2', '/a.so:/b.so', '/a.so /b.so', ' /a.so::/b.so  ', '', ':',
])
def test_preload_takes_absolute_paths_split_as_the_loader_splits_them(value):
    assert problems({'LD_PRELOAD': value}) == []


@pytest.mark.parametrize('value', [
    'libjemalloc.so.2', '/a.so:b.so', './a.so', '/opt/../a.so', '/opt/./a.so', '$ORIGIN/a.so', '/usr/$LIB/a.so',
    '/usr/${PLATFORM}/a.so', 7,
])
def test_preload_refuses_what_is_not_an_absolute_path_as_written(value):
    found = problems({'LD_PRELOAD': value})
    assert len(found) == 1 and found[0].startswith('runtime_env_extra_vars.LD_PRELOAD = ') \
        and rt.LOADER_FILES_ALLOWED['LD_PRELOAD'] in found[0], found


def test_audit_is_split_on_colons_only():
    assert problems({'LD_AUDIT': '/opt/a.so:/opt/b.so'}) == []
    assert problems({'LD_AUDIT': '/opt/a.so /opt/b.so'}) == [
        'runtime_env_extra_vars.LD_AUDIT = "/opt/a.so /opt/b.so" is not allowed: ' + rt.LOADER_FILES_ALLOWED['LD_AUDIT']]


@pytest.mark.parametrize('value', ['', '/usr/local/cuda/lib64', '/a:/b', '/a;/b', '/opt/$LIB'])
def test_library_path_takes_absolute_directories(value):
    assert problems({'LD_LIBRARY_PATH': value}) == []


@pytest.mark.parametrize('value', ['lib', '/a:', ':/a', '/a::/b', '/a;lib', '/a/../b', '.'])
def test_library_path_refuses_an_entry_that_means_the_current_directory(value):
    found = problems({'LD_LIBRARY_PATH': value})
    assert found == ['runtime_env_extra_vars.LD_LIBRARY_PATH = "%s" is not allowed: %s' % (value, rt.LOADER_DIRS_ALLOWED)]


@pytest.mark.parametrize('name', rt.LOADER_DIAGNOSTICS)
def test_the_loaders_diagnostics_are_refused_whatever_their_value(name):
    for value in ('1', '0', '', 'all'):
        found = problems({name: value})
        assert len(found) == 1 and found[0].startswith('runtime_env_extra_vars.%s = ' % name) \
            and "the loader's diagnostics" in found[0], found


def test_other_loader_variables_pass_as_any_variable():
    assert problems({'LD_BIND_NOW': '1', 'LD_BIND_NOT': '1', 'LD_HWCAP_MASK': '0'}) == []


def test_a_profile_gets_the_rules_of_form():
    found = problems({}, runtime_env_nccl_profiles={'mine': {'LD_PRELOAD': 'libnccl.so.2'}})
    assert found == ['runtime_env_nccl_profiles.mine.LD_PRELOAD = "libnccl.so.2" is not allowed: '
                     + rt.LOADER_FILES_ALLOWED['LD_PRELOAD']]


def test_every_missing_or_irregular_file_is_named_in_one_message():
    found = problems({'LD_PRELOAD': '/a.so /b.so:/c'}, probed({'/a.so': FILE, '/b.so': MISSING_FILE, '/c': DIRECTORY}))
    assert found == ['runtime_env_extra_vars.LD_PRELOAD = "/a.so /b.so:/c" is not allowed: files that exist on the host '
                     '(every program started in this environment loads them: a missing one makes each print a loader '
                     'error); /b.so does not exist; /c is not a regular file']


def test_preload_and_audit_are_each_judged():
    found = problems({'LD_PRELOAD': '/a.so', 'LD_AUDIT': '/b.so'}, probed({'/a.so': MISSING_FILE, '/b.so': MISSING_FILE}))
    assert [one.split(' = ')[0] for one in found] == ['runtime_env_extra_vars.LD_AUDIT', 'runtime_env_extra_vars.LD_PRELOAD']


def test_a_link_to_a_file_is_a_file():
    # The probe follows links (follow: true): a link's stat is its target's.
    assert problems({'LD_PRELOAD': '/usr/lib/libjemalloc.so'}, probed({'/usr/lib/libjemalloc.so': FILE})) == []


@pytest.mark.parametrize('probes', [
    None, {}, {'loader_files': {}}, {'loader_files': {'/a.so': {'skipped': True}}}, {'loader_files': 'garbage'},
])
def test_no_probe_of_a_file_no_verdict(probes):
    assert problems({'LD_PRELOAD': '/a.so'}, probes) == []


def test_a_value_refused_by_its_form_is_not_named_again():
    found = problems({'LD_PRELOAD': '/a.so:b.so'}, probed({'/a.so': MISSING_FILE}))
    assert len(found) == 1 and rt.LOADER_FILES_ALLOWED['LD_PRELOAD'] in found[0], found


def test_a_file_in_a_venv_made_later_in_the_run_waits_for_the_roles_own_validate():
    in_venv, outside = '/opt/ml-env/lib/libnccl.so.2', '/opt/ml-envx/libnccl.so.2'
    files = {in_venv: MISSING_FILE, outside: MISSING_FILE}
    assert problems({'LD_PRELOAD': in_venv}, probed(files, venv=MISSING_FILE)) == []
    # The venv's prefix is a directory, not a string prefix.
    assert len(problems({'LD_PRELOAD': outside}, probed(files, venv=MISSING_FILE))) == 1
    # Once the venv exists (the role's own validate, after ml_env), a missing file is refused.
    assert len(problems({'LD_PRELOAD': in_venv}, probed(files, venv=DIRECTORY))) == 1
    # Without the venv's probe nothing says it is made later.
    assert len(problems({'LD_PRELOAD': in_venv}, {'loader_files': files})) == 1
