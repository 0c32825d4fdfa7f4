# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""runtime_env's validate entry point stats the loader's files on the host (issue 41).

`runtime_env_extra_vars: {LD_PRELOAD: /no/such.so}` was accepted, and every login shell of the host
then printed a loader error. The checks (tests/unit/plugins/module_utils/test_runtime_env_loader.py,
tests/bad_inputs/runtime_env.yml) judge what roles/runtime_env/tasks/validate.yml's probe found; here
the entry point itself, through ansible-playbook, as playbooks/validate.yml imports it, on this
machine over the local connection: it only reads (the minimal facts, a stat of each path) and every
path it looks at is a file or directory of the test's own temporary directory. Each case is a host
of its own in one inventory, all of them this machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BINDIR = os.path.dirname(sys.executable)
PLAYBOOK = [{'name': 'Check the input of runtime_env', 'hosts': 'all', 'gather_facts': False,
             'tasks': [{'name': 'Check the input', 'ansible.builtin.import_role': {
                 'name': 'inferops.gpu.runtime_env', 'tasks_from': 'validate'}}]}]
PROBE = 'Look at the files the loader would load'
CHECK = "Check the runtime environment's input"


@pytest.fixture(scope='module')
def outcome(tmp_path_factory):
    if not os.path.exists(os.path.join(BINDIR, 'ansible-playbook')):
        pytest.skip('ansible-playbook is not beside %s' % sys.executable)
    tmp = tmp_path_factory.mktemp('loader')
    lib = tmp / 'lib'
    lib.mkdir()
    (lib / 'libok.so').write_bytes(b'\x7fELF')
    (lib / 'liblink.so').symlink_to(lib / 'libok.so')
    (tmp / 'venv' / 'lib').mkdir(parents=True)
    cases = {
        'no_loader': {},
        'good': {'LD_PRELOAD': '%s/libok.so %s/liblink.so' % (lib, lib), 'LD_LIBRARY_PATH': str(lib)},
        'missing': {'LD_PRELOAD': '%s/libok.so:%s/missing.so' % (lib, lib)},
        'directory': {'LD_AUDIT': str(lib)},
        'bare_name': {'LD_PRELOAD': 'libok.so'},
        'venv_made_later': {'LD_PRELOAD': '%s/venv-not-yet/lib/libnccl.so.2' % tmp},
        'venv_there': {'LD_PRELOAD': '%s/venv/lib/libnccl.so.2' % tmp},
    }
    venvs = {'venv_made_later': '%s/venv-not-yet' % tmp, 'venv_there': '%s/venv' % tmp}
    hosts = dict((name, {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
                         '__runtime_env_os_family': 'Debian', 'runtime_env_extra_vars': extra,
                         'runtime_env_venv': venvs.get(name, '%s/no-venv' % tmp)})
                 for name, extra in cases.items())
    (tmp / 'inventory.yml').write_text(yaml.safe_dump({'all': {'hosts': hosts}}))
    (tmp / 'play.yml').write_text(yaml.safe_dump(PLAYBOOK))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, 'ansible.cfg'), ANSIBLE_HOME=str(tmp / 'ansible-home'),
               ANSIBLE_LOCAL_TEMP=str(tmp / 'local-tmp'), ANSIBLE_REMOTE_TEMP=str(tmp / 'remote-tmp'),
               ANSIBLE_STDOUT_CALLBACK='ansible.builtin.json', PATH=BINDIR + os.pathsep + os.environ.get('PATH', ''))
    proc = subprocess.run([os.path.join(BINDIR, 'ansible-playbook'), '-i', str(tmp / 'inventory.yml'), str(tmp / 'play.yml')],
                          cwd=str(tmp), env=env, capture_output=True, text=True, timeout=300, check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail('no JSON report (rc %s): %s' % (proc.returncode, (proc.stdout + proc.stderr)[-3000:]))
    results = {}
    for play in report['plays']:
        for task in play['tasks']:
            for host, result in task['hosts'].items():
                # The role's tasks are named `inferops.gpu.runtime_env : <name>`.
                results.setdefault(host, {})[task['task']['name'].split(' : ', 1)[-1]] = result
    return {'lib': str(lib), 'tmp': str(tmp), 'results': results, 'tail': (proc.stdout + proc.stderr)[-3000:]}


def verdict(outcome, host):
    """(whether the probe ran, the check's failure message or None)."""
    results = outcome['results'].get(host)
    assert results and CHECK in results, 'no check on %s: %s' % (host, outcome['tail'])
    probe, check = results[PROBE], results[CHECK]
    return not probe.get('skipped'), (check['msg'] if check.get('failed') else None)


def test_no_loader_file_no_probe(outcome):
    # No remote task is added to the check play where nothing is preloaded.
    assert verdict(outcome, 'no_loader') == (False, None)


def test_existing_files_and_a_link_to_one_pass(outcome):
    assert verdict(outcome, 'good') == (True, None)


def test_a_missing_file_is_refused_naming_it(outcome):
    ran, message = verdict(outcome, 'missing')
    lib = outcome['lib']
    assert ran and message == (
        'runtime_env_extra_vars.LD_PRELOAD = "%s/libok.so:%s/missing.so" is not allowed: files that exist on the host '
        '(every program started in this environment loads them: a missing one makes each print a loader error); '
        '%s/missing.so does not exist' % (lib, lib, lib))


def test_a_directory_is_refused(outcome):
    ran, message = verdict(outcome, 'directory')
    assert ran and message.startswith('runtime_env_extra_vars.LD_AUDIT = "%s" is not allowed' % outcome['lib']) \
        and message.endswith('%s is not a regular file' % outcome['lib']), message


def test_a_bare_name_is_refused_without_looking_it_up(outcome):
    ran, message = verdict(outcome, 'bare_name')
    assert not ran and message.startswith('runtime_env_extra_vars.LD_PRELOAD = "libok.so" is not allowed: absolute paths'), message


def test_a_file_of_a_venv_not_made_yet_waits_and_of_one_made_is_judged(outcome):
    assert verdict(outcome, 'venv_made_later') == (True, None)
    ran, message = verdict(outcome, 'venv_there')
    assert ran and message.endswith('%s/venv/lib/libnccl.so.2 does not exist' % outcome['tmp']), message
