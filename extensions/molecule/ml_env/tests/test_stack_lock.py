"""One lock for the fleet, on real PyPI packages (runs after test_ml_env.py, which reads the state the
side effects left).

1. The check play names the nodes whose current release was not built from the profile's lock.
2. The two hosts (Debian 12 and 13) install the committed lock one after the other: the same
   distributions at the same versions (pip freeze), the lock kept in each release, the release named
   after it; then the check play names no node.
3. A copy of the lock with idna's hashes changed fails the build naming idna; nothing is switched.
4. A lock made for other pins is refused before any change, naming the pin and the lock's version.
5. A profile without a lock says so in the run.
6. verify.yml shows each node's lock, and which nodes are not on the lock their profile names.
"""

import hashlib
import json
import os
import re
import subprocess

import pytest

PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd())
SCENARIO = os.path.join(PROJECT, "extensions", "molecule", "ml_env")
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
HOSTS = ["inferops-mlenv-1", "inferops-mlenv-2"]
LOCK = os.path.join(SCENARIO, "locks", "ci-lock.txt")
UV = "/opt/ml-env.d/tools/uv-0.13.9/bin/uv"
# The check play checks every role's input: what the other roles need on these hosts (the wheels
# method serves Debian 13; the server has no default model path; the containers have no GPU).
CHECK = [os.path.join(PROJECT, "playbooks", "validate.yml"), "-e", "cuda_toolkit_method=wheels",
         "-e", "sglang_server_model_path=/srv/models/demo",
         "-e", '{"sglang_server_preflight_ignore": ["gpu_count", "gpu_clean", "driver"]}']


def play(playbook, *args):
    """(rc, the messages of failed and debug results, the output's tail) of one run of playbook."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    proc = subprocess.run(["ansible-playbook", "-i", INVENTORY, "-e", "@" + os.path.join(SCENARIO, "vars", "ci.yml")]
                          + list(args) + [playbook], cwd=PROJECT, env=env, capture_output=True, text=True,
                          timeout=1200, check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {}
    messages = []
    for one in report.get("plays", []):
        for task in one.get("tasks", []):
            for host, result in task.get("hosts", {}).items():
                if result.get("failed") or task["task"]["name"].startswith(("Name the nodes", "inferops.gpu.ml_env : Say")):
                    messages.append("%s: %s" % (host, result.get("msg", "")))
    return proc.returncode, "\n".join(messages), proc.stdout[-3000:] + proc.stderr[-2000:]


def docker(host, command):
    return subprocess.run(["docker", "exec", host, "sh", "-c", command], capture_output=True, text=True,
                          timeout=120, check=False).stdout.strip()


def apply(profile, *args):
    return play(os.path.join(SCENARIO, "lock_apply.yml"), "-e", "mlenv_lock_profile=" + profile, *args)


def state(host):
    return docker(host, "readlink /opt/ml-env; ls /opt/ml-env.d/releases")


@pytest.fixture(scope="module")
def locked():
    before = play(*CHECK, "-e", "ml_env_profile=ci-lock")
    # One host after the other: each resolves nothing, it installs the lock.
    first = apply("ci-lock", "-l", HOSTS[0])
    second = apply("ci-lock", "-l", HOSTS[1])
    after = play(*CHECK, "-e", "ml_env_profile=ci-lock")
    return before, first, second, after


def test_the_check_play_names_the_nodes_on_another_lock(locked):
    before, first, second, after = locked
    assert before[0] == 0, before[2]
    assert all("%s built from no lock, the profile has" % host in before[1] for host in HOSTS), before[1]
    assert after[0] == 0 and "built from" not in after[1], after[1]


def test_both_hosts_install_exactly_the_committed_lock(locked):
    before, first, second, after = locked
    assert first[0] == 0 and second[0] == 0, first[2] + second[2]
    with open(LOCK, "rb") as handle:
        lock = handle.read()
    freezes = []
    for host in HOSTS:
        release = docker(host, "readlink /opt/ml-env")
        assert docker(host, "sha256sum %s/.ml_env/lock.txt | cut -d' ' -f1" % release) == hashlib.sha256(lock).hexdigest()
        pinset = json.loads(docker(host, "cat %s/.ml_env/pins.json" % release))
        assert pinset["lock"] == hashlib.sha256(lock).hexdigest()
        freezes.append(docker(host, "%s pip freeze --python /opt/ml-env/bin/python" % UV))
    assert freezes[0] == freezes[1], freezes
    locked_versions = sorted(re.findall(r"^([a-z0-9-]+==[^ \\]+)", lock.decode(), re.M))
    assert sorted(freezes[0].lower().splitlines()) == locked_versions, (freezes[0], locked_versions)


def test_a_tampered_lock_fails_naming_the_package_and_switches_nothing(locked, tmp_path):
    text = open(LOCK).read()
    head, idna, tail = re.split(r"(?ms)(^idna==.*?)(?=^[a-z])", text, maxsplit=1)
    tampered = tmp_path / "ci-lock-tampered.txt"
    tampered.write_text(head + re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, idna) + tail)
    was = state(HOSTS[0])
    rc, messages, tail_out = apply("ci-lock-tampered", "-l", HOSTS[0], "-e", "mlenv_tampered_lock=%s" % tampered)
    assert rc != 0 and "idna" in messages and "hash" in messages.lower(), messages + tail_out
    assert state(HOSTS[0]) == was


def test_a_lock_made_for_other_pins_is_refused_before_any_change(locked):
    was = state(HOSTS[0])
    rc, messages, tail_out = apply("ci-lock-stale", "-l", HOSTS[0])
    assert rc != 0, tail_out
    assert "the profile pins packaging 24.2" in messages and "packaging==24.1" in messages, messages
    assert state(HOSTS[0]) == was


def test_a_profile_without_a_lock_says_so(locked):
    rc, messages, tail_out = play(*CHECK, "-e", "ml_env_profile=ci-b", "-l", HOSTS[0])
    assert rc == 0 and 'ml_env_profiles["ci-b"] has no lock' in messages, messages + tail_out


def test_verify_shows_the_lock_and_the_nodes_not_on_their_profiles(locked, tmp_path):
    with open(LOCK, "rb") as handle:
        sha = hashlib.sha256(handle.read()).hexdigest()
    rows = {}
    for profile in ("ci-lock", "ci-b"):
        report = tmp_path / ("%s.json" % profile)
        rc, messages, tail_out = play(os.path.join(PROJECT, "verify.yml"), "-e", "ml_env_profile=" + profile,
                                      "-e", "verify_report_path=%s" % report)
        assert rc == 0, tail_out
        with open(str(report)) as handle:
            rows[profile] = json.load(handle)
    for row in rows["ci-lock"]["hosts"]:
        assert row["lock"] == sha and row["lock_wanted"] == sha, row
    assert all(row["lock_wanted"] == "none" for row in rows["ci-b"]["hosts"])
    assert sum("(want none)" in line for line in rows["ci-b"]["table"]) == len(HOSTS), rows["ci-b"]["table"]
