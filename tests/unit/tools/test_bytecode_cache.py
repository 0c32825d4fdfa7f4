# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every Python that make runs caches its bytecode in .build/pycache, even where the environment turns
bytecode off: the tool venvs hold none (uv compiles nothing), and each Python that imported ansible-core
compiled it again (1.3 s of CPU, for each ansible-playbook of the suite)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_make_caches_bytecode_out_of_the_tree_whatever_the_environment_says():
    target = 'bytecode-setting: ; @%s -c "import sys; print(sys.dont_write_bytecode, sys.pycache_prefix)"' % sys.executable
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE='1')
    env.pop('PYTHONPYCACHEPREFIX', None)
    out = subprocess.run(['make', '-s', '--no-print-directory', '-C', ROOT, '--eval', target, 'bytecode-setting'],
                         env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ['False', os.path.join(ROOT, '.build', 'pycache')]
