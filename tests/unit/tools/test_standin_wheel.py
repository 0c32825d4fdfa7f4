"""tools/standin-wheel.sh, without network: the stand-in's wheel is built once per content of its sources
and the path printed; scenarios in parallel lanes calling it at once get one wheel, never a half-written
one; a changed source builds a new one; a failed build prints why and leaves nothing. The build itself is a
stub here (its backend comes from the index): every serving scenario and `make gpu-wheels` run the real one."""

import os
import shutil
import subprocess
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
WHEEL = 'sglang-0.5.9-py3-none-any.whl'
# Stands in for `python -m pip wheel ... -w DIR SRC`: slow enough for two callers to overlap, and it
# counts its builds.
PIP = """#!/bin/sh
while [ "$1" != -w ]; do shift; done
echo build >>"$STUB_COUNT"
[ -z "$STUB_FAIL" ] || { echo "pip: no flit_core" >&2; exit 1; }
sleep "${STUB_SLEEP:-0.5}"
cat "$3"/pyproject.toml >"$2/%s"
""" % WHEEL


def tree(tmp_path):
    root = tmp_path / 'repo'
    (root / 'tools').mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, 'tools', 'standin-wheel.sh'), root / 'tools')
    shutil.copytree(os.path.join(ROOT, 'tests', 'fixtures', 'sglang_standin'), root / 'tests' / 'fixtures' / 'sglang_standin',
                    ignore=shutil.ignore_patterns('__pycache__'))
    stub = tmp_path / 'python'
    stub.write_text(PIP)
    stub.chmod(0o755)
    return root, {'PATH': os.environ['PATH'], 'STANDIN_WHEEL_PYTHON': str(stub), 'STUB_COUNT': str(tmp_path / 'count')}


def run(root, env):
    return subprocess.run([str(root / 'tools' / 'standin-wheel.sh')], env=env, capture_output=True, text=True, timeout=60, check=False)


def builds(tmp_path):
    path = tmp_path / 'count'
    return len(path.read_text().split()) if path.exists() else 0


def test_two_callers_at_once_get_one_wheel_and_a_second_call_builds_nothing(tmp_path):
    root, env = tree(tmp_path)
    results = []
    callers = [threading.Thread(target=lambda: results.append(run(root, env))) for dummy in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    paths = set(r.stdout.strip() for r in results)
    assert len(paths) == 1 and paths.pop().endswith('/' + WHEEL)
    built = os.listdir(root / '.build' / 'standin-wheel')
    assert len(built) == 1 and not built[0].startswith('.'), built   # no stage left behind
    assert builds(tmp_path) == 2
    again = run(root, env)
    assert again.returncode == 0 and again.stdout == results[0].stdout
    assert builds(tmp_path) == 2
    assert oct(os.stat(again.stdout.strip()).st_mode & 0o777) == '0o644'


def test_a_changed_source_builds_a_new_wheel_beside_the_old(tmp_path):
    root, env = tree(tmp_path)
    first = run(root, env).stdout.strip()
    with open(root / 'tests' / 'fixtures' / 'sglang_standin' / 'sglang' / '__init__.py', 'a') as f:
        f.write('# changed\n')
    second = run(root, env).stdout.strip()
    assert first != second and os.path.exists(first) and os.path.exists(second)


def test_a_failed_build_says_so_and_leaves_nothing(tmp_path):
    root, env = tree(tmp_path)
    failed = run(root, dict(env, STUB_FAIL='1'))
    assert failed.returncode == 1 and failed.stdout == ''
    assert 'no flit_core' in failed.stderr and 'building the stand-in from' in failed.stderr
    assert os.listdir(root / '.build' / 'standin-wheel') == []


def test_a_hung_build_is_cut_at_the_deadline_and_leaves_nothing(tmp_path):
    root, env = tree(tmp_path)
    hung = run(root, dict(env, STUB_SLEEP='30', STANDIN_WHEEL_TIMEOUT='1'))
    assert hung.returncode == 1 and hung.stdout == '' and 'ran past 1 s' in hung.stderr
    assert os.listdir(root / '.build' / 'standin-wheel') == []
