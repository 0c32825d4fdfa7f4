"""The bad-input tables (tests/bad_inputs/*.yml) against a bare host, through site.yml itself.

Each bad case runs `ansible-playbook site.yml -e @case.json` (JSON keeps "true" a string, as
`-e var=true` does) and must fail with every `expect` string in its failure messages; clean cases
run only the check play and must pass. Before and after all of them, the host's state is the same.
"""

import concurrent.futures
import glob
import json
import os
import subprocess
import tempfile

import pytest
import yaml

HOST = "inferops-badin-1"
PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd())
TABLES = sorted(glob.glob(os.path.join(PROJECT, "tests", "bad_inputs", "*.yml")))
# Everything a role could write to; systemd's own state changes by itself.
SNAPSHOT = (
    "find /etc /opt /usr/local /var/lib /root -xdev "
    r"\( -path /var/lib/systemd -o -path /root/.ansible -o -path /etc/ld.so.cache \) -prune -o "
    r"-printf '%p %s %m %T@\n' | sort"
)


def load_cases():
    cases = []
    for table in TABLES:
        role = os.path.splitext(os.path.basename(table))[0]
        with open(table) as handle:
            for case in yaml.safe_load(handle):
                cases.append(dict(case, id="%s/%s" % (role, case["name"])))
    return cases


CASES = load_cases()


def snapshot():
    out = subprocess.run(["docker", "exec", HOST, "sh", "-c", SNAPSHOT], capture_output=True, text=True,
                         check=True, timeout=60)
    return set(out.stdout.splitlines())


def failure_messages(report):
    """Every failure message of a json-callback report: task msgs and looped items' msgs."""
    messages = []
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            for result in task.get("hosts", {}).values():
                if not result.get("failed"):
                    continue
                messages.append(str(result.get("msg", "")))
                # A looped assert marks its failed items with evaluated_to, not always failed.
                for item in result.get("results", []):
                    if item.get("failed") or item.get("evaluated_to") is False:
                        messages.append(str(item.get("msg", "")))
    return "\n".join(messages)


def run_case(case):
    playbook = "validate.yml" if case.get("clean") else "site.yml"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(case["vars"], handle)
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    try:
        proc = subprocess.run(
            ["ansible-playbook", "-i", HOST + ",", "-e", "ansible_connection=community.docker.docker",
             "-e", "@" + handle.name, os.path.join(PROJECT, "playbooks", playbook)],
            cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600, check=False)
    finally:
        os.unlink(handle.name)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {}
    return proc.returncode, failure_messages(report), proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.fixture(scope="module")
def outcomes():
    before = snapshot()
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip([case["id"] for case in CASES], pool.map(run_case, CASES)))
    return {"results": results, "before": before, "after": snapshot()}


def test_every_role_has_a_table():
    assert sorted(os.path.basename(t) for t in TABLES) == ["cuda_toolkit.yml", "ml_env.yml", "runtime_env.yml"]


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_case(outcomes, case):
    rc, messages, tail = outcomes["results"][case["id"]]
    if case.get("clean"):
        assert rc == 0, tail
        return
    assert rc != 0, "site.yml accepted %s" % json.dumps(case["vars"])
    missing = [text for text in case["expect"] if text not in messages]
    assert not missing, "%s not in the failure: %s\n%s" % (missing, messages, tail)


def test_nothing_changed(outcomes):
    changed = sorted(outcomes["before"] ^ outcomes["after"])
    assert not changed, "\n".join(changed[:50])
