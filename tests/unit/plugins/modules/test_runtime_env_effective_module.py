# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""runtime_env_effective end to end (issue 42): a real venv with the runtime_env start-up hook and its spec, run
as the module runs it, with the hand edits the by-hand upgrade made (a sitecustomize.py, a .pth line, a
usercustomize.py, the unit's own environment file) and a library resolved by the real loader."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from ansible_collections.inferops.gpu.plugins.modules import runtime_env_effective
from module_harness import assert_options_match_spec, include_system_site, invoke, make_venv, patch_exits, record_argument_spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
HOOK_FILES = os.path.join(ROOT, 'roles', 'runtime_env', 'files')
SPEC = {'vars': {'CUDA_HOME': '/usr/local/cuda-13.0', 'NCCL_PROTO': 'Simple'}, 'path_prepend': ['/usr/local/cuda-13.0/bin']}


@pytest.fixture(autouse=True)
def exits(monkeypatch):
    patch_exits(monkeypatch)


@pytest.fixture
def release(tmp_path):
    """(python, site-packages, spec file, home): a venv whose hook applies SPEC."""
    python, site = make_venv(tmp_path / 'release')
    for name in ('inferops_runtime_env.pth', 'inferops_runtime_env.py'):
        shutil.copy(os.path.join(HOOK_FILES, name), site)
    spec = tmp_path / 'runtime-env.json'
    spec.write_text(json.dumps(SPEC))
    home = tmp_path / 'home'
    home.mkdir()
    return python, site, str(spec), home


def check(release, **more):
    python, _site, spec, home = release
    args = dict({'python': python, 'expected': SPEC['vars'], 'path_prepend': SPEC['path_prepend'],
                 'environment': {'INFEROPS_RUNTIME_ENV_SPEC': spec, 'HOME': str(home)}}, **more)
    result = invoke(runtime_env_effective, args)
    return bool(result.get('failed')), result


def test_the_hooks_spec_is_what_the_interpreter_sees(release):
    failed, result = check(release)
    assert not failed, result
    assert result['environ']['CUDA_HOME'] == '/usr/local/cuda-13.0'
    assert result['environ']['PATH'].startswith('/usr/local/cuda-13.0/bin:')
    assert result['setters']['CUDA_HOME'].split(' line ')[0] == os.path.join(release[1], 'inferops_runtime_env.py')
    assert result['modules'] == {'sitecustomize': None, 'usercustomize': None} and result['problems'] == []


def test_a_hand_edited_sitecustomize_beats_the_hook_and_is_named_with_its_line(release):
    _python, site, _spec, _home = release
    path = os.path.join(site, 'sitecustomize.py')
    with open(path, 'w') as handle:
        handle.write('import os\n# by hand, for the 12.8 upgrade\nos.environ["CUDA_HOME"] = "/usr/local/cuda-12.8"\n'
                     'os.environ["HF_TOKEN"] = "hf_secret_value"\n')
    failed, result = check(release)
    assert failed and result['environ']['CUDA_HOME'] == '/usr/local/cuda-12.8'
    assert result['problems'] == [
        'CUDA_HOME: the release\'s Python sees "/usr/local/cuda-12.8", the spec says "/usr/local/cuda-13.0": set by '
        '%s line 3; remove that assignment (the start-up hook then gives the spec\'s value)' % path]
    assert result['modules']['sitecustomize'] == path
    # A name beyond the spec is a warning by name and place; its value is never read back.
    assert result['cautions'] == ['HF_TOKEN is set by %s line 4 while the interpreter starts, beyond the spec' % path]
    assert 'hf_secret_value' not in json.dumps(result)


def test_a_pth_line_a_usercustomize_and_a_path_edit_are_named_too(release):
    python, site, _spec, home = release
    with open(os.path.join(site, 'zz-hand.pth'), 'w') as handle:
        handle.write('# by hand\nimport os; os.environ["NCCL_PROTO"] = "LL"\n')
    # site.py reads a user site only where the venv includes the system's site directories.
    include_system_site(python)
    user_site = home / '.local' / 'lib' / ('python%d.%d' % sys.version_info[:2]) / 'site-packages'
    user_site.mkdir(parents=True)
    (user_site / 'usercustomize.py').write_text(
        'import os\nos.environ["PATH"] = "/usr/local/cuda-12.8/bin:" + os.environ["PATH"]\n')
    failed, result = check(release)
    assert failed
    problems = result['problems']
    assert len(problems) == 2, problems
    assert problems[0].startswith('NCCL_PROTO: the release\'s Python sees "LL", the spec says "Simple": set by %s line 2'
                                  % os.path.join(site, 'zz-hand.pth')), problems
    assert problems[1].startswith('PATH: the release\'s Python sees "/usr/local/cuda-12.8/bin:/usr/local/cuda-13.0/bin:')
    assert problems[1].endswith('set by %s line 2' % (user_site / 'usercustomize.py')), problems


def test_the_units_environment_file_wins_over_the_hook_and_is_named(release, tmp_path):
    env_file = tmp_path / 'server.env'
    env_file.write_text('# the unit\'s own\nNCCL_PROTO="LL"\n')
    failed, result = check(release, environment_files=[str(env_file), '-/nonexistent/optional.env'])
    assert failed and result['problems'] == [
        'NCCL_PROTO: the release\'s Python sees "LL", the spec says "Simple": set by %s line 2; the unit\'s environment '
        'sets it, and the start-up hook never overrides a value a process has' % env_file]
    failed, result = check(release, environment_files=['/nonexistent/required.env'])
    assert failed and result['msg'] == 'cannot read the environment file /nonexistent/required.env: No such file or directory'


def test_a_library_is_held_to_the_directories_it_must_come_from(release):
    failed, result = check(release, libraries={'libc.so.6': ['/opt/cuda-13.0']})
    assert failed and result['problems'][0].startswith('libc.so.6: the loader resolves /')
    assert 'not a file under /opt/cuda-13.0' in result['problems'][0]
    libc = os.path.dirname(os.path.realpath(result['libraries']['libc.so.6']['path']))
    failed, result = check(release, libraries={'libc.so.6': [libc], 'libnotthere.so.1': []})
    assert not failed, result
    assert result['libraries']['libnotthere.so.1']['path'] is None
    assert 'libnotthere.so.1' in result['libraries']['libnotthere.so.1']['error'] and result['cautions'] == []


def test_the_values_travel_on_stdin_and_never_on_a_command_line(release, monkeypatch):
    seen = []
    real = runtime_env_effective.module_runner

    def spying(module, seconds):
        runner = real(module, seconds)

        def run(argv, **kwargs):
            seen.append((argv, kwargs.get('data')))
            return runner(argv, **kwargs)
        return run
    monkeypatch.setattr(runtime_env_effective, 'module_runner', spying)
    failed, result = check(release, environment={'HF_TOKEN': 'hf_on_stdin_only', 'INFEROPS_RUNTIME_ENV_SPEC': release[2]})
    assert not failed, result
    (argv, data), = seen
    assert 'hf_on_stdin_only' not in ' '.join(argv) and 'hf_on_stdin_only' in data


def test_the_options_match_the_documentation(release, monkeypatch):
    seen = record_argument_spec(monkeypatch, runtime_env_effective)
    assert not check(release)[0]
    assert_options_match_spec(runtime_env_effective, seen)


def test_exec_d_text_is_named_by_the_line_that_ran_it(release):
    _python, site, _spec, _home = release
    path = os.path.join(site, 'sitecustomize.py')
    with open(path, 'w') as handle:
        handle.write('import os\nexec(\'os.environ["CUDA_HOME"] = "/usr/local/cuda-12.8"\')\n')
    failed, result = check(release)
    assert failed and result['setters']['CUDA_HOME'] == '%s line 2' % path
