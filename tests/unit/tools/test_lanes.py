"""tools/lanes.sh with a stand-in make: lanes of several scenarios, and what a failure stops."""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FAKE_MAKE = r'''#!/bin/bash
# `make molecule SCENARIO=x` runs x, `make t` runs t; each appends its name to $FAKE_LOG.
t=
for a in "$@"; do case $a in SCENARIO=*) t=${a#SCENARIO=};; --*|molecule) ;; *) [ -z "$t" ] && t=$a;; esac; done
echo "$t" >> "$FAKE_LOG"
sleep 0.3
case " $SLOW " in *" $t "*) sleep 5;; esac
case " $FAIL " in *" $t "*) echo "FAILED test_$t.py::test_it - AssertionError: $t broke"; exit 3;; esac
exit 0
'''


def lanes(tmp_path, *args, fail='', slow=''):
    make = tmp_path / 'make'
    make.write_text(FAKE_MAKE)
    make.chmod(0o755)
    log = tmp_path / 'ran'
    env = dict(os.environ, MAKE=str(make), FAKE_LOG=str(log), FAIL=fail, SLOW=slow, LANES_LOGS=str(tmp_path / 'logs'))
    done = subprocess.run(['bash', os.path.join(ROOT, 'tools', 'lanes.sh')] + list(args), env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    ran = log.read_text().split() if log.exists() else []
    return done.returncode, done.stdout, ran


def test_every_scenario_of_every_lane_and_every_main_target_runs(tmp_path):
    rc, out, ran = lanes(tmp_path, 'a+b c', 'lint', 'unit')
    assert rc == 0, out
    assert sorted(ran) == ['a', 'b', 'c', 'lint', 'unit']
    assert ran.index('a') < ran.index('b')
    for name in ('a', 'b', 'c'):
        assert 'lanes: scenario %s (run beside the main lane) exited 0' % name in out


def test_a_failed_scenario_stops_its_lane_only_and_fails_the_run(tmp_path):
    rc, out, ran = lanes(tmp_path, 'a+b c', 'lint', fail='a')
    assert rc == 1
    assert 'b' not in ran and 'c' in ran and 'lint' in ran
    assert 'lanes: scenario a (run beside the main lane) exited 3' in out
    assert 'lanes: scenario b (run beside the main lane) exited stopped' in out
    # What failed is said again at the very end, where a CI log's tail shows it.
    assert out.splitlines()[-3:-1] == ['lanes: what failed in scenario a:', 'FAILED test_a.py::test_it - AssertionError: a broke']


def test_a_failed_main_target_stops_the_main_lane_and_the_lanes(tmp_path):
    rc, out, ran = lanes(tmp_path, 'a+b', 'lint', 'unit', fail='lint', slow='a')
    assert rc == 1
    assert "lanes: 'lint' failed (rc 3)" in out and 'unit' not in ran
    assert 'lanes: stopped lane a+b (the main lane failed)' in out
    assert 'b' not in ran
    assert out.splitlines()[-3:-1] == ["lanes: what failed in 'lint':", 'FAILED test_lint.py::test_it - AssertionError: lint broke']


def test_no_lanes_runs_the_main_targets_alone(tmp_path):
    rc, out, ran = lanes(tmp_path, '', 'lint', 'unit')
    assert rc == 0 and ran == ['lint', 'unit'], out
    assert 'beside' not in out
