# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adopting a host set up by hand (issue 42): the by-hand edits cut out line by line, the distro's lines kept, a
loader file moved aside, every file backed up first with a record and an undo script; what cannot be cut out alone
refuses the whole adoption before anything is written."""

from __future__ import annotations

import ast
import json
import subprocess
import types

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import adoption, hand_edits
from distro_sitecustomize import DISTRO_SITECUSTOMIZE  # tests/unit/distro_sitecustomize.py

DISTRO = DISTRO_SITECUSTOMIZE
HAND = '''import os
os.environ["CUDA_HOME"] = "/usr/local/cuda-12.8"
os.environ.setdefault("NCCL_DEBUG", "WARN")
os.environ.update({
    "NCCL_PROTO": "LL",
})
os.putenv("HF_HUB_OFFLINE", "1")
if os.path.isdir("/usr/local/cuda-12.8"):
    os.environ["TRITON_PTXAS_PATH"] = "/usr/local/cuda-12.8/bin/ptxas"
'''
MANAGED = {'CUDA_HOME', 'NCCL_PROTO', 'TRITON_PTXAS_PATH', 'PATH'}


def left(text, path='/usr/lib/python3.12/sitecustomize.py'):
    return [(f['name'], f['how']) for f in hand_edits.python_edits(path, text)]


def test_the_writes_of_the_specs_variables_are_cut_out_and_the_distros_lines_stay():
    new, changes = adoption.neutralise_python('/usr/lib/python3.12/sitecustomize.py', DISTRO + HAND, MANAGED)
    assert new.startswith(DISTRO)
    assert [(c['line'], c['names']) for c in changes] == [(9, ['CUDA_HOME']), (11, ['NCCL_PROTO']),
                                                          (16, ['TRITON_PTXAS_PATH'])]
    assert changes[1]['text'] == 'os.environ.update({\n    "NCCL_PROTO": "LL",\n})'
    # What is left: the default and the variable beyond the spec, each on its line.
    assert left(new) == [('NCCL_DEBUG', 'sets a default for'), ('HF_HUB_OFFLINE', 'assigns')]
    lines = new.splitlines()
    assert lines[8] == 'pass  # inferops.gpu adopted: os.environ["CUDA_HOME"] = "/usr/local/cuda-12.8"'
    assert lines[11] == '# inferops.gpu adopted:     "NCCL_PROTO": "LL",'
    # Inside the if block: the statement's indent and a pass, so the block still runs (and sets nothing).
    assert lines[15] == '    pass  # inferops.gpu adopted: os.environ["TRITON_PTXAS_PATH"] = "/usr/local/cuda-12.8/bin/ptxas"'
    # Run against a stand-in os module: the process's own environment stays untouched.
    fake_os = types.SimpleNamespace(environ={}, putenv=lambda *a: None, path=types.SimpleNamespace(isdir=lambda p: True))
    exec(compile(new.replace('import apport_python_hook', 'raise ImportError').replace('import os\n', ''), 'x', 'exec'),
         {'os': fake_os, '__name__': 'sitecustomize'})
    assert fake_os.environ == {'NCCL_DEBUG': 'WARN'}
    # Nothing to do: the same text.
    assert adoption.neutralise_python('/x/sitecustomize.py', DISTRO, MANAGED) == (DISTRO, [])


@pytest.mark.parametrize('text, line', [
    ('import os; os.environ["CUDA_HOME"] = "x"\n', 1),
    ('import os\nif os.environ.setdefault("CUDA_HOME", "x"):\n    pass\n', 2),
    ('import os\nos.environ["NCCL_PROTO"] = "LL"; os.environ["X"] = "1"\n', 2),
])
def test_a_write_that_cannot_be_cut_out_alone_is_refused_with_its_file_and_line(text, line):
    with pytest.raises(adoption.Refused) as caught:
        adoption.neutralise_python('/etc/python3.12/sitecustomize.py', text, MANAGED)
    assert str(caught.value).startswith('/etc/python3.12/sitecustomize.py line %d ' % line)
    assert 'by hand' in str(caught.value)


def test_a_file_python_cannot_read_is_refused():
    with pytest.raises(adoption.Refused, match='cannot be read as Python'):
        adoption.neutralise_python('/x/sitecustomize.py', 'os.environ[\n', MANAGED)


def test_a_pth_line_is_commented_out_and_its_other_lines_stay():
    text = '/opt/extra\nimport os; os.environ["NCCL_PROTO"] = "LL"\nimport os; os.environ["HF_HOME"] = "/data"\n'
    new, changes = adoption.neutralise_python('/x/site-packages/hand.pth', text, MANAGED)
    assert new == ('/opt/extra\n# inferops.gpu adopted: import os; os.environ["NCCL_PROTO"] = "LL"\n'
                   'import os; os.environ["HF_HOME"] = "/data"\n')
    assert changes == [{'line': 2, 'names': ['NCCL_PROTO'], 'text': 'import os; os.environ["NCCL_PROTO"] = "LL"'}]


def test_login_files_lose_the_specs_variables_but_never_the_distros_path(tmp_path):
    text = 'PATH="/usr/local/sbin:/usr/bin"\nCUDA_HOME="/usr/local/cuda-12.8"\nHF_HOME=/data\n'
    new, changes = adoption.neutralise_login('/etc/environment', text, MANAGED)
    assert new == 'PATH="/usr/local/sbin:/usr/bin"\n# inferops.gpu adopted: CUDA_HOME="/usr/local/cuda-12.8"\nHF_HOME=/data\n'
    assert [c['line'] for c in changes] == [2]
    script = 'if [ -d /usr/local/cuda-12.8 ]; then\n    export CUDA_HOME=/usr/local/cuda-12.8\nfi\n'
    new, changes = adoption.neutralise_login('/etc/profile.d/cuda.sh', script, MANAGED)
    assert new.splitlines()[1] == ': # inferops.gpu adopted:     export CUDA_HOME=/usr/local/cuda-12.8'
    (tmp_path / 'cuda.sh').write_text(new)
    # A block left empty would be a syntax error for every login shell: `:` keeps it valid.
    assert subprocess.run(['sh', '-n', str(tmp_path / 'cuda.sh')], check=False, timeout=60).returncode == 0
    assert subprocess.run(['sh', '-c', '. %s; echo "${CUDA_HOME-unset}"' % (tmp_path / 'cuda.sh')],
                          capture_output=True, text=True, check=True, timeout=60).stdout == 'unset\n'


@pytest.fixture
def host(tmp_path):
    """A distro sitecustomize.py reached through a link (Debian's /usr/lib/python3.X one is), a hand ld.so.conf.d
    file and the loader's view of it."""
    etc = tmp_path / 'etc'
    (etc / 'python3.12').mkdir(parents=True)
    (etc / 'ld.so.conf.d').mkdir()
    real = etc / 'python3.12' / 'sitecustomize.py'
    real.write_text(DISTRO + HAND)
    real.chmod(0o644)
    link = tmp_path / 'sitecustomize.py'
    link.symlink_to(real)
    loader_file = etc / 'ld.so.conf.d' / 'cuda-12-8.conf'
    loader_file.write_text('/usr/local/cuda-12.8/targets/x86_64-linux/lib\n')
    found = {'texts': {'python': {str(link): DISTRO + HAND}, 'login': {}},
             'findings': hand_edits.python_edits(str(link), DISTRO + HAND), 'managed': MANAGED,
             'loader': [{'file': str(loader_file), 'line': 1, 'directory': '/usr/local/cuda-12.8/targets/x86_64-linux/lib',
                         'libraries': ['libcudart.so.12']},
                        {'file': str(etc / 'ld.so.conf.d' / 'other.conf'), 'line': 1, 'directory': '/opt/other/lib',
                         'libraries': ['libnccl.so.2']}],
             'resolved': {'libcudart.so.13': '/usr/local/cuda-12.8/targets/x86_64-linux/lib/libcudart.so.13',
                          'libnccl.so.2': '/opt/ml-env/lib/libnccl.so.2'}}
    return {'found': found, 'link': link, 'real': real, 'loader_file': loader_file, 'backup': tmp_path / 'backup'}


def test_the_plan_edits_the_start_up_file_and_moves_only_the_entry_the_loader_takes_from(host):
    actions = adoption.plan(host['found'], ['/usr/local/cuda-13.0', '/opt/ml-env'], ['libcudart.so.13', 'libnccl.so.2'])
    assert [edit['path'] for edit in actions['edits']] == [str(host['link'])]
    assert actions['moves'] == [{'path': str(host['loader_file']), 'taken': ['libcudart.so.13']}]


def test_apply_backs_up_first_and_undo_puts_everything_back(host):
    actions = adoption.plan(host['found'], ['/usr/local/cuda-13.0'], ['libcudart.so.13'])
    record = adoption.apply(actions, str(host['backup'] / '20261208T010000Z'), '20261208T010000Z')
    root = host['backup'] / '20261208T010000Z'
    # The link is still a link; its target holds the edit, with its mode.
    assert host['link'].is_symlink() and host['real'].read_text() == actions['edits'][0]['text']
    assert oct(host['real'].stat().st_mode & 0o777) == '0o644'
    assert not host['loader_file'].exists()
    copy = adoption.backup_path(str(root), str(host['link']))
    assert open(copy).read() == DISTRO + HAND
    assert open(adoption.backup_path(str(root), str(host['loader_file']))).read().startswith('/usr/local/cuda-12.8')
    written = json.loads((root / 'adoption.json').read_text())
    assert written == json.loads(json.dumps(record))
    assert [c['line'] for c in written['edited'][0]['changes']] == [9, 11, 16]
    assert written['moved'][0]['taken'] == ['libcudart.so.13']
    undo = (root / 'undo.sh').read_text()
    assert undo.splitlines()[-1] == 'ldconfig'
    # Run it without its ldconfig line: the files are as they were.
    subprocess.run(['sh', '-c', '\n'.join(undo.splitlines()[:-1])], check=True, timeout=60)
    assert host['real'].read_text() == DISTRO + HAND and host['loader_file'].exists()


def test_one_refusal_stops_the_whole_plan(host):
    found = host['found']
    found['texts']['python']['/x/usercustomize.py'] = 'import os; os.environ["CUDA_HOME"] = "x"\n'
    with pytest.raises(adoption.Refused, match='/x/usercustomize.py line 1 '):
        adoption.plan(found, ['/usr/local/cuda-13.0'], ['libcudart.so.13'])
    assert host['real'].read_text() == DISTRO + HAND and host['loader_file'].exists()
    assert ast.parse(host['real'].read_text())
