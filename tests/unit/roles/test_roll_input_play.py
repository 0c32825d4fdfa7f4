# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roll's own input stops site.yml and rolling.yml in their first play, before any node is read (issue 41).

site.yml over a fleet where every node is converged sent no host through its check play, so
`-e rolling_serial=0` (or `abc`) passed with rc 0 while rolling.yml refused it. The check now sits in
playbooks/converged.yml, which both run first, and fires whether or not a node rolls.

The playbooks themselves, through ansible-playbook, on two inventory hosts no connection can reach
(ssh to a closed local port): nothing here can touch this machine. A bad batch size must end the run
in the first play, at the check, before the first task that connects (an unreachable host would say
the check did not fire). The control, a good batch size, gets past the check to that task and its
unreachable hosts. tests/unit/plugins/lookup/test_roll_own_input.py holds the check's verdicts.
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
FIRST_PLAY = 'Find the nodes already converged to this input'
CHECK = "Check the roll's own input"
# Nothing listens on the discard port of the loopback address: a connection is refused at once.
UNREACHABLE = {'ansible_connection': 'ssh', 'ansible_host': '127.0.0.1', 'ansible_port': 9,
               'ansible_ssh_common_args': '-o ConnectTimeout=5 -o BatchMode=yes',
               'sglang_server_model_path': '/srv/models/demo'}


def run(tmp_path, playbook, *extra):
    if not os.path.exists(os.path.join(BINDIR, 'ansible-playbook')):
        pytest.skip('ansible-playbook is not beside %s' % sys.executable)
    inventory = tmp_path / 'inventory.yml'
    inventory.write_text(yaml.safe_dump({'all': {'hosts': {'node-1': UNREACHABLE, 'node-2': UNREACHABLE}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, 'ansible.cfg'), ANSIBLE_HOME=str(tmp_path / 'ansible-home'),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'), ANSIBLE_STDOUT_CALLBACK='ansible.builtin.json',
               ANSIBLE_RETRY_FILES_ENABLED='false', PATH=BINDIR + os.pathsep + os.environ.get('PATH', ''))
    proc = subprocess.run([os.path.join(BINDIR, 'ansible-playbook'), '-i', str(inventory),
                           os.path.join(ROOT, 'playbooks', playbook)] + list(extra),
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300, check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail('no JSON report (rc %s): %s' % (proc.returncode, (proc.stdout + proc.stderr)[-3000:]))
    return proc.returncode, report, (proc.stdout + proc.stderr)[-3000:]


def tasks_run(report):
    """[(play, task, {host: result})] in the order they ran."""
    return [(play['play']['name'], task['task']['name'], task['hosts'])
            for play in report['plays'] for task in play['tasks']]


@pytest.mark.parametrize('playbook, serial', [('site.yml', '0'), ('site.yml', 'abc'), ('rolling.yml', '0')])
def test_a_bad_batch_size_ends_the_run_at_the_check_before_any_node(tmp_path, playbook, serial):
    rc, report, tail = run(tmp_path, playbook, '-e', 'rolling_serial=%s' % serial)
    ran = tasks_run(report)
    assert rc == 2, tail
    assert [(play, task) for play, task, dummy in ran] == [(FIRST_PLAY, 'Check inferops_fast_path'), (FIRST_PLAY, CHECK)], ran
    results = ran[-1][2]
    assert len(results) == 1, results  # once
    result = list(results.values())[0]
    assert result['failed'] and result['msg'].startswith('rolling_serial = "%s" is not allowed: a batch size' % serial), result
    # No host was reached, or tried: the run ended before the first task that connects.
    assert not any(one.get('unreachable') for dummy, dummy, hosts in ran for one in hosts.values()), ran
    assert set(report['stats']) <= {'node-1', 'node-2'} and not any(s['unreachable'] for s in report['stats'].values())


def test_a_good_batch_size_passes_the_check_and_goes_on_to_the_nodes(tmp_path):
    # The control: the same run with a good value reaches the task that reads the node (whose hosts
    # nothing can reach): the check above is what stopped the runs of the bad values.
    rc, report, tail = run(tmp_path, 'converged.yml', '-e', 'rolling_serial=2')
    ran = tasks_run(report)
    assert [task for dummy, task, dummy in ran][:3] == [
        'Check inferops_fast_path', CHECK, 'Compare the node with the record of its last converge'], ran
    assert not list(ran[1][2].values())[0].get('failed'), ran[1]
    assert all(one.get('unreachable') for one in ran[2][2].values()) and len(ran[2][2]) == 2, ran[2]
    assert rc == 4, tail
