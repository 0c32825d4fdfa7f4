"""The bad-input tables (tests/bad_inputs/*.yml) on a bare host: what only a real host shows.

Every case runs in the unit suite through the Python layer (tests/unit/plugins/lookup/). Here:
the first bad case of each table goes through site.yml itself with `-e @case.json` (JSON keeps
"true" a string, as `-e var=true` does), where it must stop the run before any change; and the
cases marked `on_host` (their verdict needs a host probe, whose result the unit suite replays)
run through their role's validate entry point on this host, each a host of its own in a
generated inventory (all of them the same container), which proves the recorded probes. Before
and after all of it, the host's state is the same.
"""

import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

import pytest
import yaml

HOST = "inferops-badin-1"
# What the scenario's group_vars leave out on its GPU-less host (molecule.yml), for the runs outside that inventory.
NO_GPU = {"sglang_server_preflight_ignore": ["gpu_count", "gpu_clean", "driver"]}
PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd())
sys.path.insert(0, os.path.join(PROJECT, "tests", "bad_inputs"))
from bad_input_cases import TABLES, load_cases  # noqa: E402  pylint: disable=wrong-import-position

CONNECTION = {"ansible_host": HOST, "ansible_connection": "community.docker.docker"}
# Everything a role could write to; systemd's own state changes by itself.
SNAPSHOT = (
    "find /etc /opt /usr/local /var/lib /root -xdev "
    r"\( -path /var/lib/systemd -o -path /root/.ansible -o -path /etc/ld.so.cache \) -prune -o "
    r"-printf '%p %s %m %T@\n' | sort"
)


CASES = [dict(case, host="%s_%03d" % (case["role"], index)) for index, case in enumerate(load_cases())]
ON_HOST = [case for case in CASES if case.get("on_host")]
THROUGH_SITE = [next(c for c in CASES if c["role"] == role and not c.get("clean"))
                for role in sorted(set(c["role"] for c in CASES))]


def snapshot():
    out = subprocess.run(["docker", "exec", HOST, "sh", "-c", SNAPSHOT], capture_output=True, text=True,
                         check=True, timeout=120)
    return set(out.stdout.splitlines())


def outcomes_by_host(report):
    """host -> (failed, the failure messages): task msgs and looped items' msgs."""
    seen = {}
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            for host, result in task.get("hosts", {}).items():
                failed, messages = seen.get(host, (False, []))
                if result.get("failed"):
                    failed = True
                    messages.append(str(result.get("msg", "")))
                    # A looped assert marks its failed items with evaluated_to, not always failed.
                    for item in result.get("results", []):
                        if item.get("failed") or item.get("evaluated_to") is False:
                            messages.append(str(item.get("msg", "")))
                seen[host] = (failed, messages)
    return dict((host, (failed, "\n".join(messages))) for host, (failed, messages) in seen.items())


def ansible_playbook(args, timeout, env=None):
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               **(env or {}))
    proc = subprocess.run(["ansible-playbook"] + args, cwd=PROJECT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {}
    plays = [play.get("play", {}).get("name") for play in report.get("plays", [])]
    return proc.returncode, outcomes_by_host(report), plays, proc.stdout[-3000:] + proc.stderr[-3000:]


def shared_facts(tmp):
    """A fact cache in which every case host has the facts of the one container they all are.

    Gathered once (the minimal subset, as the check play gathers) instead of once per case: over
    200 setups were a quarter of the checks' time. The cache file's name is the host's name after
    a prefix that depends on ansible-core's version, so each case's file is named the same way.
    """
    cache = os.path.join(tmp, "facts")
    os.makedirs(cache)
    env = dict(os.environ, ANSIBLE_CACHE_PLUGIN="ansible.builtin.jsonfile", ANSIBLE_CACHE_PLUGIN_CONNECTION=cache,
               ANSIBLE_CACHE_PLUGIN_TIMEOUT="0")
    subprocess.run(["ansible", "all", "-i", HOST + ",", "-c", "community.docker.docker", "-m", "ansible.builtin.setup",
                    "-a", "gather_subset=min"], cwd=PROJECT, env=env, capture_output=True, check=True, timeout=300)
    gathered = [name for name in os.listdir(cache) if name.endswith(HOST)]  # one file, named for the host
    assert len(gathered) == 1, os.listdir(cache)
    with open(os.path.join(cache, gathered[0])) as handle:
        facts = handle.read()
    assert "ansible_os_family" in facts, facts[:500]  # the format differs by version too (2.21 wraps it)
    prefix = gathered[0][:-len(HOST)]
    for case in ON_HOST:
        with open(os.path.join(cache, prefix + case["host"]), "w") as handle:
            handle.write(facts)
    return dict((key, env[key]) for key in env if key.startswith("ANSIBLE_CACHE_PLUGIN"))


def check_on_host(tmp):
    """The on_host cases against their role's validate entry point, as playbooks/validate.yml imports it.

    One play per role over that table's on_host cases; site.yml's own check play is proven by the
    THROUGH_SITE cases.
    """
    if not ON_HOST:
        return {}, ""
    cache = shared_facts(tmp)
    outcomes, tails = {}, []
    for role in sorted(set(case["role"] for case in ON_HOST)):
        cases = [case for case in ON_HOST if case["role"] == role]
        inventory = {"all": {"hosts": dict((case["host"], dict(CONNECTION, **case["vars"])) for case in cases)}}
        path = os.path.join(tmp, role + "-cases.yml")
        with open(path, "w") as handle:
            yaml.safe_dump(inventory, handle)
        play = [{"name": "Check the input of " + role, "hosts": "all", "gather_facts": False,
                 "tasks": [{"name": "Check the input", "ansible.builtin.import_role": {
                     "name": "inferops.gpu." + role, "tasks_from": "validate"}}]}]
        playbook = os.path.join(tmp, role + "-check.yml")
        with open(playbook, "w") as handle:
            yaml.safe_dump(play, handle)
        rc, by_host, plays, tail = ansible_playbook(["-i", path, playbook], timeout=900, env=cache)
        outcomes.update(by_host)
        tails.append(tail)
    return outcomes, "\n".join(tails)


def through_site(case, tmp):
    path = os.path.join(tmp, case["host"] + ".json")
    with open(path, "w") as handle:
        json.dump(case["vars"], handle)
    inventory = HOST + ","
    if case["role"] == "sglang_gateway":
        # The gateway's input is checked on the hosts of its group.
        inventory = os.path.join(tmp, case["host"] + "-inventory.yml")
        with open(inventory, "w") as handle:
            yaml.safe_dump({"sglang_gateway": {"hosts": {HOST: None}}}, handle)
    # The host has no GPU: the GPU checks are left out, as the scenario's group_vars do (a case's own vars win).
    rc, outcomes, plays, tail = ansible_playbook(
        ["-i", inventory, "-e", "ansible_connection=community.docker.docker", "-e", json.dumps(NO_GPU), "-e", "@" + path,
         os.path.join(PROJECT, "playbooks", "site.yml")], timeout=600)
    return rc, outcomes.get(HOST, (False, "")), plays, tail


@pytest.fixture(scope="module")
def outcomes():
    before = snapshot()
    with tempfile.TemporaryDirectory() as tmp:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1 + len(THROUGH_SITE)) as pool:
            together = pool.submit(check_on_host, tmp)
            site = dict((case["id"], pool.submit(through_site, case, tmp)) for case in THROUGH_SITE)
            results = {"check": together.result(), "site": dict((k, f.result()) for k, f in site.items())}
    results.update(before=before, after=snapshot())
    return results


def test_every_role_has_a_table_and_a_case_through_site():
    assert sorted(os.path.basename(t) for t in TABLES) == ["cuda_toolkit.yml", "gpu_health.yml", "ml_env.yml",
                                                           "rolling.yml", "runtime_env.yml", "sglang_gateway.yml",
                                                           "sglang_server.yml"]
    assert len(THROUGH_SITE) == len(TABLES)


@pytest.mark.parametrize("case", ON_HOST, ids=[case["id"] for case in ON_HOST])
def test_on_host_case(outcomes, case):
    by_host, tail = outcomes["check"]
    assert case["host"] in by_host, "no result for %s: %s" % (case["id"], tail)
    failed, messages = by_host[case["host"]]
    if case.get("clean"):
        assert not failed, messages
        return
    assert failed, "the check play accepted %s" % json.dumps(case["vars"])
    missing = [text for text in case["expect"] if text not in messages]
    assert not missing, "%s not in the failure: %s" % (missing, messages)


@pytest.mark.parametrize("case", THROUGH_SITE, ids=[case["id"] for case in THROUGH_SITE])
def test_site_stops_before_any_change(outcomes, case):
    rc, (failed, messages), plays, tail = outcomes["site"][case["id"]]
    assert rc != 0 and failed, "site.yml accepted %s\n%s" % (json.dumps(case["vars"]), tail)
    missing = [text for text in case["expect"] if text not in messages]
    assert not missing, "%s not in the failure: %s" % (missing, messages)
    # The provisioning play never started: the check play is where it ended, after the fast path's
    # read-only comparison with the node's record (there is none here: the node is checked).
    assert plays == ["Find the nodes already converged to this input", "Check every role's input before any change"], plays


def test_nothing_changed(outcomes):
    changed = sorted(outcomes["before"] ^ outcomes["after"])
    assert not changed, "\n".join(changed[:50])
