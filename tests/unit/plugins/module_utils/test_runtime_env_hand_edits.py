# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The environment a host was given by hand, read without running it (issue 42): the by-hand upgrade's
sitecustomize.py, a .pth line, /etc/environment and profile.d, ld.so.conf.d entries and the loader's cache."""

from __future__ import annotations

from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import hand_edits
from distro_sitecustomize import DISTRO_SITECUSTOMIZE  # tests/unit/distro_sitecustomize.py

# As the original upgrade appended it to /usr/lib/python3.12/sitecustomize.py (../shared/seeds/).
SITECUSTOMIZE = DISTRO_SITECUSTOMIZE + '''import os
os.environ["CUDA_HOME"] = "/usr/local/cuda-12.8"
os.environ.setdefault("NCCL_DEBUG", "WARN")
os.environ.update({"NCCL_PROTO": "LL"}, TRITON_PTXAS_PATH="/usr/local/cuda-12.8/bin/ptxas")
os.putenv("HF_TOKEN", "hf_x")
del os.environ["NCCL_ALGO"]
name = "NCCL_" + "P2P_LEVEL"
os.environ[name] = "SYS"
'''
MANAGED = {'CUDA_HOME', 'NCCL_PROTO', 'NCCL_ALGO', 'TRITON_PTXAS_PATH', 'PATH'}
PATH = '/usr/lib/python3.12/sitecustomize.py'


def edits(text=SITECUSTOMIZE, path=PATH):
    return [(f['line'], f['name'], f['how']) for f in hand_edits.python_edits(path, text)]


def test_every_write_of_a_python_start_up_file_is_found_with_its_line():
    assert edits() == [(9, 'CUDA_HOME', 'assigns'), (10, 'NCCL_DEBUG', 'sets a default for'),
                       (11, 'NCCL_PROTO', 'assigns'), (11, 'TRITON_PTXAS_PATH', 'assigns'), (12, 'HF_TOKEN', 'assigns'),
                       (13, 'NCCL_ALGO', 'removes'), (15, '?', 'assigns')]
    # The distro's own lines alone: nothing.
    assert edits('\n'.join(SITECUSTOMIZE.splitlines()[:7])) == []


def test_a_pth_runs_only_its_import_lines_and_those_are_read_with_their_own_line():
    pth = '/opt/site/paths\n# import os; os.environ["CUDA_HOME"] = "x"\nimport os; os.environ["CUDA_HOME"] = "/usr/local/cuda-12.8"\n'
    assert edits(pth, '/usr/local/lib/python3.12/dist-packages/hand.pth') == [(3, 'CUDA_HOME', 'assigns')]
    broken = hand_edits.python_edits('/x/sitecustomize.py', 'import os\nos.environ[\n')
    assert broken[0]['how'].startswith('cannot be read as Python') and broken[0]['line'] >= 2


def test_assignments_of_the_specs_variables_are_refused_the_rest_warned():
    problems, warnings = hand_edits.judge(hand_edits.python_edits(PATH, SITECUSTOMIZE), MANAGED, [], {}, [], [])
    assert problems == [
        '%s line 9 assigns CUDA_HOME while every Python of the host starts, after the runtime environment\'s hook: the '
        'server would see that, not the spec\'s value; remove the line (keep a copy)' % PATH,
        '%s line 11 assigns NCCL_PROTO while every Python of the host starts, after the runtime environment\'s hook: '
        'the server would see that, not the spec\'s value; remove the line (keep a copy)' % PATH,
        '%s line 11 assigns TRITON_PTXAS_PATH while every Python of the host starts, after the runtime environment\'s '
        'hook: the server would see that, not the spec\'s value; remove the line (keep a copy)' % PATH,
        '%s line 13 removes NCCL_ALGO while every Python of the host starts, after the runtime environment\'s hook: the '
        'server would see that, not the spec\'s value; remove the line (keep a copy)' % PATH,
        '%s line 15 assigns a variable it computes while every Python of the host starts, after the runtime '
        'environment\'s hook: the server would see that, not the spec\'s value; remove the line (keep a copy)' % PATH]
    assert warnings == ['%s line 10 sets a default for NCCL_DEBUG while every Python of the host starts, beyond the spec'
                        % PATH, '%s line 12 assigns HF_TOKEN while every Python of the host starts, beyond the spec' % PATH]
    assert 'hf_x' not in ' '.join(problems + warnings)


def test_login_files_are_warnings_for_the_specs_names_only():
    environment = 'PATH="/usr/local/cuda-12.8/bin:/usr/bin"\nLANG=C.UTF-8\nCUDA_HOME DEFAULT=/usr/local/cuda-12.8\n'
    profile = '# by hand\nexport CUDA_HOME=/usr/local/cuda-12.8\nexport NCCL_PROTO=LL\n  # export NCCL_ALGO=Tree\n'
    findings = (hand_edits.shell_edits('/etc/environment', environment)
                + hand_edits.shell_edits('/etc/profile.d/cuda.sh', profile))
    assert [(f['file'], f['line'], f['name']) for f in findings] == [
        ('/etc/environment', 1, 'PATH'), ('/etc/environment', 2, 'LANG'), ('/etc/environment', 3, 'CUDA_HOME'),
        ('/etc/profile.d/cuda.sh', 2, 'CUDA_HOME'), ('/etc/profile.d/cuda.sh', 3, 'NCCL_PROTO')]
    problems, warnings = hand_edits.judge(findings, MANAGED, [], {}, [], [])
    assert problems == [] and len(warnings) == 4
    assert warnings[0] == ('/etc/environment line 1 assigns PATH for login shells (no unit reads it; the spec\'s value '
                           'is what the server gets)')


LDCONFIG = '''4 libs found in cache `/etc/ld.so.cache'
\tlibnccl.so.2 (libc6,x86-64) => /opt/nccl-2.21/lib/libnccl.so.2
\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2
\tlibcudart.so.13 (libc6,x86-64) => /usr/local/cuda-13.0/targets/x86_64-linux/lib/libcudart.so.13
\tlibcudart.so.12 (libc6) => /usr/local/cuda-12.8/lib/libcudart.so.12
'''


def test_a_foreign_loader_entry_that_takes_a_library_is_refused_the_others_warned():
    resolved = hand_edits.parse_ldconfig_cache(LDCONFIG)
    assert resolved == {'libnccl.so.2': '/opt/nccl-2.21/lib/libnccl.so.2',
                        'libcudart.so.13': '/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcudart.so.13'}
    loader = (hand_edits.loader_entries('/etc/ld.so.conf.d/nccl.conf', '# by hand\n/opt/nccl-2.21/lib\n')
              + hand_edits.loader_entries('/etc/ld.so.conf.d/cuda-12-8.conf', '/usr/local/cuda-12.8/lib64 # old\n'))
    problems, warnings = hand_edits.judge([], MANAGED, loader, resolved, ['/usr/local/cuda-13.0', '/opt/ml-env'],
                                          ['libcudart.so.13', 'libnccl.so.2'])
    assert problems == ['/etc/ld.so.conf.d/nccl.conf line 2 adds /opt/nccl-2.21/lib, from which the loader now resolves '
                        'libnccl.so.2 instead of the collection\'s: move that file aside (keep a copy) and run ldconfig']
    assert warnings == ['/etc/ld.so.conf.d/cuda-12-8.conf line 1 adds /usr/local/cuda-12.8/lib64, a library directory '
                        'the collection does not own']
    # Under a root the collection owns, the same entry is no finding of consequence.
    problems, warnings = hand_edits.judge([], MANAGED, loader[:1], resolved, ['/opt/nccl-2.21'], ['libnccl.so.2'])
    assert problems == [] and warnings == []


def test_the_start_up_files_in_the_order_site_runs_them():
    tree = {'/venv/site': ['inferops_runtime_env.pth', 'a.pth', 'sitecustomize.py', 'x.py'],
            '/usr/lib/python3.12': ['sitecustomize.py'], '/root/.local/site': ['usercustomize.py', 'u.pth']}

    def listdir(path):
        if path not in tree:
            raise OSError(path)
        return tree[path]

    def isfile(path):
        directory, name = path.rpartition('/')[::2]
        return name in tree.get(directory, [])

    assert hand_edits.start_up_files('/usr/lib/python3.12', ['/venv/site', '/nowhere'], ['/root/.local/site'],
                                     listdir, isfile) == [
        '/venv/site/a.pth', '/venv/site/inferops_runtime_env.pth', '/root/.local/site/u.pth',
        '/usr/lib/python3.12/sitecustomize.py', '/venv/site/sitecustomize.py', '/root/.local/site/usercustomize.py']


def test_only_loader_entries_holding_cuda_or_nccl_libraries_outside_the_systems_directories_count():
    tree = {'/opt/nccl-2.21/lib': ['libnccl.so.2', 'libnccl.so.2.21.5'], '/usr/lib/x86_64-linux-gnu': ['libnccl.so.2'],
            '/usr/local/cuda-12.8/lib64': ['libcudart.so.12', 'libcuda.so.1'], '/opt/other/lib': ['libz.so.1']}

    def listdir(path):
        if path not in tree:
            raise OSError(path)
        return tree[path]

    loader = [{'file': '/etc/ld.so.conf.d/%d.conf' % n, 'line': 1, 'directory': d}
              for n, d in enumerate(['/opt/nccl-2.21/lib/', '/usr/lib/x86_64-linux-gnu', '/usr/local/cuda-12.8/lib64',
                                     '/opt/other/lib', '/gone'])]
    assert [(e['directory'], e['libraries']) for e in hand_edits.cuda_entries(loader, listdir)] == [
        ('/opt/nccl-2.21/lib/', ['libnccl.so.2', 'libnccl.so.2.21.5']), ('/usr/local/cuda-12.8/lib64', ['libcudart.so.12'])]


def test_a_link_to_the_collections_toolkit_is_the_toolkit(tmp_path):
    # As on the GPU validation host: /etc/ld.so.conf.d/000_cuda.conf adds /usr/local/cuda/targets/x86_64-linux/lib,
    # /usr/local/cuda being a link to the toolkit the collection uses.
    toolkit = tmp_path / 'cuda-13.0'
    (toolkit / 'targets' / 'x86_64-linux' / 'lib').mkdir(parents=True)
    (tmp_path / 'cuda').symlink_to(toolkit)
    entry = str(tmp_path / 'cuda' / 'targets' / 'x86_64-linux' / 'lib')
    loader = hand_edits.loader_entries('/etc/ld.so.conf.d/000_cuda.conf', entry + '\n')
    resolved = {'libcudart.so.13': entry + '/libcudart.so.13'}
    assert hand_edits.judge([], MANAGED, loader, resolved, [str(toolkit)], ['libcudart.so.13']) == ([], [])
    # Another toolkit behind the link is another toolkit.
    problems, _warnings = hand_edits.judge([], MANAGED, loader, resolved, [str(tmp_path / 'cuda-12.8')],
                                           ['libcudart.so.13'])
    assert problems and 'from which the loader now resolves libcudart.so.13' in problems[0]
