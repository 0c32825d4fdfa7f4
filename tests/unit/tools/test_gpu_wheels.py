"""tools/gpu-wheels.sh and its lock (`make gpu-wheels`), without network: the lock pins exactly what the
GPU scripts carry (ansible-core's dependencies read from the tool venv's own ansible-core, sglang.yml's
pins, the versions the docs name), and the script refuses a malformed lock before it touches anything."""

import importlib.metadata
import os
import re
import subprocess

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, 'tools', 'gpu-wheels.sh')
LOCK = os.path.join(ROOT, 'tools', 'gpu-wheels.lock')
PIN = re.compile(r'^([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][A-Za-z0-9.+!]*) --hash=sha256:[0-9a-f]{64}$')
# The GPU host's interpreter: CPython 3.12 on Linux x86_64 (docs/validation.md).
HOST = {'python_version': '3.12', 'python_full_version': '3.12.3', 'sys_platform': 'linux', 'os_name': 'posix',
        'platform_system': 'Linux', 'platform_machine': 'x86_64', 'implementation_name': 'cpython',
        'platform_python_implementation': 'CPython', 'extra': ''}


def read(*path):
    with open(os.path.join(ROOT, *path), encoding='utf-8') as f:
        return f.read()


def sections(text=None):
    """{'.whl': {name: version}, '.gpuwheels': {...}} from the lock's '# -> DIR/' sections."""
    found, current = {}, None
    for line in (read('tools', 'gpu-wheels.lock') if text is None else text).splitlines():
        if line in ('# -> .whl/', '# -> .gpuwheels/'):
            current = found.setdefault(line[5:-1], {})
        elif line and not line.startswith('#'):
            match = PIN.match(line)
            assert match and current is not None, line
            current[canonicalize_name(match.group(1))] = match.group(2)
    return found


def tool_venv_pins():
    pins = {}
    for line in read('tools', 'requirements.txt').splitlines():
        if '==' in line and not line.startswith('#'):
            name, version = line.split('==')
            pins[canonicalize_name(name)] = version.strip()
    return pins


def needs(name):
    """The distributions `name` needs on the GPU host, itself included, from installed metadata."""
    seen, todo = set(), [name]
    while todo:
        dist = canonicalize_name(todo.pop())
        if dist in seen:
            continue
        seen.add(dist)
        for text in importlib.metadata.requires(dist) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate(HOST):
                todo.append(requirement.name)
    return seen


def test_every_line_of_the_lock_is_an_exact_pin_with_its_hash_in_one_of_the_two_sections():
    lines = [line for line in read('tools', 'gpu-wheels.lock').splitlines() if line and not line.startswith('#')]
    assert lines and all(PIN.match(line) for line in lines), [line for line in lines if not PIN.match(line)]
    pins = sections()
    assert sorted(pins) == ['.gpuwheels', '.whl'] and all(pins.values())
    names = [canonicalize_name(PIN.match(line).group(1)) for line in lines]
    assert len(names) == len(set(names)), 'a project pinned twice'


def test_whl_holds_exactly_ansible_core_and_uv_with_what_they_need_on_the_host():
    # The tool venv runs the same ansible-core: its metadata says what the host needs (markers
    # evaluated for CPython 3.12 on Linux x86_64, no extras).
    whl = sections()['.whl']
    assert importlib.metadata.version('ansible-core') == whl['ansible-core']
    wanted = needs('ansible-core') | {'uv'}
    assert {'jinja2', 'markupsafe', 'pyyaml', 'packaging', 'resolvelib', 'cryptography', 'cffi', 'pycparser'} <= wanted
    assert set(whl) == wanted, 'needed, not pinned: %s; pinned, not needed: %s' % (wanted - set(whl), set(whl) - wanted)


def test_the_versions_are_the_tool_venvs_and_the_ones_the_docs_name():
    whl = sections()['.whl']
    venv = tool_venv_pins()
    # The core the suite runs on, and its dependencies at the same versions.
    assert {name: venv[name] for name in whl if name != 'uv'} == {name: v for name, v in whl.items() if name != 'uv'}
    assert re.search(r'^uv_version=%s$' % re.escape(whl['uv']), read('tools', 'venv.sh'), re.M)
    doc = read('docs', 'validation.md')
    assert 'ansible-core %s and uv %s travel there' % (whl['ansible-core'], whl['uv']) in doc
    head = doc.split('\n## ', 1)[0]
    assert '**Carried wheels.**' in head and '`make gpu-wheels`' in head and 'tools/gpu-wheels.lock' in head


def test_gpuwheels_holds_the_standin_and_exactly_the_other_pins_of_sglang_yml():
    profile = yaml.safe_load(read('tests', 'gpu', 'sglang.yml'))
    assert profile['ml_env_no_index'] is True and profile['ml_env_find_links'][0].endswith('/.gpuwheels')
    pins = {canonicalize_name(name): str(version) for name, version in profile['ml_env_extra_packages'].items()}
    # sglang is the stand-in, built from the working tree at the version the profile pins.
    standin = re.search(r'^version = "([^"]+)"$', read('tests', 'fixtures', 'sglang_standin', 'pyproject.toml'), re.M)
    assert pins.pop('sglang') == standin.group(1)
    assert sections()['.gpuwheels'] == pins


def test_every_gpu_script_that_runs_ansible_installs_the_carried_wheels_and_finds_uv_there():
    install = 'pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl'
    scripts = sorted(f for f in os.listdir(os.path.join(ROOT, 'tests', 'gpu')) if f.startswith('run_') and f.endswith('.sh'))
    assert scripts
    # One preamble, sourced by every script (the duplicates check found it copied eight times).
    assert install in read('tests', 'gpu', 'lib.sh')
    for script in scripts:
        text = read('tests', 'gpu', script)
        assert install not in text, script
        if re.search(r'\bansible(-playbook)? ', text):
            assert '. "$(dirname "$0")/lib.sh"' in text, script
        # The stand-in's wheelhouse is reached through sglang.yml only.
        if 'tests/gpu/sglang.yml' in text:
            assert '.gpuwheels' in text, script
    inventory = yaml.safe_load(read('tests', 'gpu', 'inventory.yml'))
    assert inventory['blackwell']['vars']['ml_env_uv_path'] == '/tmp/site/bin/uv'


def test_the_directories_stay_out_of_git_and_of_the_galaxy_tarball_and_out_of_make_test():
    assert {'/.whl/', '/.gpuwheels/'} <= set(read('.gitignore').splitlines())
    assert {'.whl', '.gpuwheels'} <= set(yaml.safe_load(read('galaxy.yml'))['build_ignore'])
    makefile = read('Makefile')
    assert re.search(r'^gpu-wheels: tools\n\ttools/gpu-wheels\.sh$', makefile, re.M)
    checks = re.search(r'^CHECKS := (.*)$', makefile, re.M).group(1).split()
    assert 'gpu-wheels' not in checks


GOOD = read('tools', 'gpu-wheels.lock')
UV = [line for line in GOOD.splitlines() if line.startswith('uv==')][0]
PYYAML = [line for line in GOOD.splitlines() if line.startswith('pyyaml==')][0]


@pytest.mark.parametrize('lock, said', [
    ('ansible-core==2.21.5 --hash=sha256:' + '0' * 64 + '\n' + GOOD, ":1: a pin before any '# -> .whl/'"),
    (GOOD.replace(UV, UV[:-1]), 'not NAME==VERSION --hash=sha256:<64 hex digits>: uv==0.13.9'),
    (GOOD.replace(UV, UV.split(' ')[0]), 'not NAME==VERSION --hash=sha256:<64 hex digits>: uv==0.13.9'),
    (GOOD.replace(UV, UV.replace('==', '>=')), 'not NAME==VERSION'),
    (GOOD.replace(UV, UV + '\n' + UV.replace('uv==', 'UV==')), 'uv is pinned twice (first on line'),
    (GOOD.replace(UV, UV + '\n' + PYYAML.replace('pyyaml==', 'PyYAML==')), 'pyyaml is pinned twice (first on line'),
    (GOOD.replace(UV + '\n', ''), "uv is not pinned under '# -> .whl/'"),
    (GOOD.split('# -> .gpuwheels/')[0], "no pins under '# -> .gpuwheels/'"),
], ids=['before-a-section', 'short-hash', 'no-hash', 'not-exact', 'twice', 'twice-by-another-spelling', 'no-uv', 'no-gpuwheels'])
def test_the_script_refuses_a_malformed_lock_before_it_removes_or_downloads_anything(tmp_path, lock, said):
    if not os.access(os.path.join(ROOT, '.build', 'venv', 'bin', 'uv'), os.X_OK):
        pytest.skip('no tool venv (make tools): the script stops before it reads the lock')
    (tmp_path / 'bad.lock').write_text(lock, encoding='utf-8')
    old = tmp_path / '.whl' / 'old-0.1-py3-none-any.whl'
    old.parent.mkdir()
    old.write_text('')
    env = dict(os.environ, GPU_WHEELS_LOCK=str(tmp_path / 'bad.lock'), GPU_WHEELS_OUT=str(tmp_path),
               # Any download would have to go through this, and fail.
               PIP_INDEX_URL='http://127.0.0.1:9/simple', PIP_NO_INDEX='1')
    done = subprocess.run(['bash', SCRIPT], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert said in done.stderr
    assert done.stderr.rstrip().endswith('is malformed: nothing made, nothing removed')
    assert done.stdout == '' and old.exists()


def test_a_failed_download_leaves_no_wheels_at_all_never_the_old_ones(tmp_path):
    # The committed lock passes the script's own check; then the directories are emptied before
    # anything is fetched, so a download that fails (no index, no links here) leaves nothing stale.
    if not os.access(os.path.join(ROOT, '.build', 'venv', 'bin', 'uv'), os.X_OK):
        pytest.skip('no tool venv (make tools)')
    for d in ('.whl', '.gpuwheels'):
        (tmp_path / d).mkdir()
        (tmp_path / d / 'old-0.1-py3-none-any.whl').write_text('')
    (tmp_path / 'links').mkdir()
    env = dict(os.environ, GPU_WHEELS_OUT=str(tmp_path), PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX='1',
               PIP_FIND_LINKS=str(tmp_path / 'links'))
    env.pop('GPU_WHEELS_LOCK', None)
    stages = set(os.listdir(os.path.join(ROOT, '.build')))
    done = subprocess.run(['bash', SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'gpu-wheels: pip download of the .whl/ pins of %s failed' % LOCK in done.stderr
    assert not (tmp_path / '.whl').exists() and not (tmp_path / '.gpuwheels').exists()
    assert not [d for d in set(os.listdir(os.path.join(ROOT, '.build'))) - stages if d.startswith('gpu-wheels.')]
