"""Rolls over three serving hosts, in order, while each host samples its own /health_generate.

1. Roll to release B with the second host (Debian 13) given a broken server environment: it fails
   its health gate, goes back to A healthy, the roll stops, the third host is untouched.
2. A roll of the server's arguments with the second host healthy but slow: the throughput gate fails
   it the same way (the fast path: the health gate and the server role, no release to build).
3. site.yml with a changed pin (release C) rolls the serving fleet one host at a time and converges
   every host (the scenario's idempotence step has shown that site.yml on the serving fleet
   restarts nothing). 4. A roll of the server's arguments alone runs the health gate and the server
   role only, behind the same gates. 5. verify.yml reports every host without changing it.
6. The fast path: a hand-edited file sends its node through the role that owns it and those after,
   which put it back; inferops_fast_path=false sends a converged node through every role (a no-op
   roll restarts nothing, even right after logrotate -f took the start lines out of the log); then a
   no-op site.yml over the converged fleet runs no role task at all; a bad switch is refused; the
   same inventory text with a vaulted key rotated and a referenced variable changed rolls the node,
   which serves the new key and name, and an unchanged inventory takes the fast path again.
7. A roll whose new port a foreign process holds fails in the preflight, and its rollback leaves the
   old server running, never restarted (its PID and revision file unchanged), within seconds; so does a
   roll whose arguments the release's own SGLang parser refuses (a typo of --tp-size).
Through all of it, at no sample time is more than one host (one batch) out of service.
"""

import collections
import datetime
import json
import os
import re
import subprocess
import tempfile
import time

import pytest

PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd())
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
HOSTS = ["inferops-roll-%d" % n for n in range(1, 4)]
# A release's name covers the interpreter it was built with: the Debian 12 hosts (1 and 3, Python
# 3.11) share one release of a pin set, the Debian 13 host (2, Python 3.13) has its own.
SAME_DISTRO = [(HOSTS[0], HOSTS[2])]
FAILING, UNTOUCHED = HOSTS[1], HOSTS[2]
# The server's arguments changed and nothing else: the roll of test 4, kept by the runs after it.
NEW_ARGS = {"sglang_server_args": ["--tp", "1", "--cuda-graph-max-bs", "64", "--disable-custom-all-reduce"]}
# A sample counts a host as down when it did not answer 200; at most this many at once (serial 1).
BATCH = 1
# molecule.yml's, kept in the failing host's override.
TOKEN_TIME = {"SGLANG_STANDIN_TOKEN_SECONDS": "0.02", "SGLANG_STANDIN_DRAIN_POLL_SECONDS": "1"}


def ansible_playbook(playbook, *args, host_vars=None, timeout=1500):
    """(rc, per-host stats, output tail) of one run against the scenario's inventory."""
    argv = ["ansible-playbook", "-i", INVENTORY]
    with tempfile.TemporaryDirectory() as tmp:
        if host_vars:
            extra = os.path.join(tmp, "extra.json")
            with open(extra, "w") as handle:
                json.dump({"all": {"hosts": host_vars}}, handle)
            argv += ["-i", extra]
        env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
        proc = subprocess.run(argv + list(args) + [os.path.join(PROJECT, playbook)], cwd=PROJECT, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {}
    # Ansible's warnings (stderr): a run must print none an operator would have to learn to ignore.
    report["warnings"] = [line for line in proc.stderr.splitlines() if "[WARNING]" in line]
    messages = []
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            for host, result in task.get("hosts", {}).items():
                if result.get("failed") and not result.get("ignore_errors"):
                    messages.append("%s: %s" % (host, result.get("msg", "")))
                if "msg" in result and "upgraded:" in str(result.get("msg")):
                    messages.append("%s: %s" % (host, result["msg"]))
    return (proc.returncode, report.get("stats", {}), "\n".join(messages), proc.stdout[-4000:] + proc.stderr[-2000:],
            report)


def docker(host, command):
    out = subprocess.run(["docker", "exec", host, "sh", "-c", command], capture_output=True, text=True,
                         timeout=120, check=False)
    return out.stdout.strip()


def release(host):
    return os.path.basename(docker(host, "readlink /opt/ml-env"))


def main_pid(host):
    return docker(host, "systemctl show -p MainPID --value sglang-server.service")


def health(host):
    return docker(host, "curl -s -o /dev/null -w '%{http_code}' --max-time 30 http://127.0.0.1:30000/health_generate")


def samples(host, since):
    """[(time, up)] of the host's sampler after `since`."""
    found = []
    for line in docker(host, "cat /var/log/health-samples.log").splitlines():
        stamp, dummy, code = line.partition(" ")
        if float(stamp) >= since:
            found.append((float(stamp), code == "200"))
    return found


def most_down_at_once(since, until):
    """The largest number of hosts down at one instant, from every host's samples in [since, until]."""
    events = []
    for host in HOSTS:
        for stamp, up in samples(host, since):
            if stamp <= until:
                events.append((stamp, host, up))
    down, worst, when = set(), 0, None
    for stamp, host, up in sorted(events):
        (down.discard if up else down.add)(host)
        if len(down) > worst:
            worst, when = len(down), (stamp, sorted(down))
    return worst, when


class Roll:
    """One run with the time window its samples belong to."""

    def __init__(self, playbook, *args, host_vars=None):
        self.started = time.time()
        self.rc, self.stats, self.messages, self.tail, self.report = ansible_playbook(playbook, *args,
                                                                                      host_vars=host_vars)
        self.ended = time.time()

    def assert_one_batch_at_most(self):
        worst, when = most_down_at_once(self.started, self.ended)
        assert worst <= BATCH, "%d hosts down at once at %s" % (worst, when)


@pytest.fixture(scope="module", autouse=True)
def samplers():
    """Every host samples its own /health_generate while the rolls run (not before: it costs CPU)."""
    for host in HOSTS:
        docker(host, "systemd-run --unit=health-sampler /usr/local/bin/health-sampler")
    yield
    for host in HOSTS:
        docker(host, "systemctl stop health-sampler")


@pytest.fixture(scope="module")
def release_a():
    return dict((host, release(host)) for host in HOSTS)


@pytest.fixture(scope="module")
def broken_roll(release_a):
    pids = dict((host, main_pid(host)) for host in HOSTS)
    roll = Roll("playbooks/rolling.yml", "-e", "ml_env_profile=ci-b",
                host_vars={FAILING: {"sglang_server_extra_environment": dict(TOKEN_TIME, SGLANG_STANDIN_FAULT="warmup_failed")}})
    return roll, pids


@pytest.fixture(scope="module")
def slow_roll(broken_roll):
    pids = dict((host, main_pid(host)) for host in HOSTS)
    # Limited to the failing host and the one after it (the first is on B already), on the release
    # they have: only the server's arguments change, and the failing host's environment.
    roll = Roll("playbooks/rolling.yml", "-e", json.dumps(NEW_ARGS), "-l", ",".join(HOSTS[1:]),
                host_vars={FAILING: {"sglang_server_extra_environment": dict(TOKEN_TIME, SGLANG_STANDIN_FAULT="slow")}})
    return roll, pids


@pytest.fixture(scope="module")
def site_new_pin(slow_roll):
    releases = dict((host, release(host)) for host in HOSTS)
    roll = Roll("site.yml", "-e", "ml_env_profile=ci-c")
    roll.releases_before = releases
    return roll


def assert_failed_and_rolled_back(roll, pids, release_a, cause):
    assert roll.rc != 0, roll.tail
    assert "%s failed and was rolled back" % FAILING in roll.messages, roll.messages
    assert cause in roll.messages, roll.messages
    assert "rolled back: %s; untouched: %s" % (FAILING, UNTOUCHED) in roll.messages, roll.messages
    # The failed host is back on A and serving; the host after it was never touched.
    assert release(FAILING) == release_a[FAILING] and health(FAILING) == "200"
    # The files came back as they were: owner, group and mode too (the service user reads them).
    for path in ("/etc/inferops/runtime-env.json", "/etc/inferops/runtime-env.env",
                 "/etc/sglang/sglang-server.env", "/etc/sglang/sglang-server.yaml", "/var/log/sglang/revision"):
        assert docker(FAILING, "stat -c '%U:%G %a' " + path) == docker(UNTOUCHED, "stat -c '%U:%G %a' " + path), path
    assert release(UNTOUCHED) == release_a[UNTOUCHED] and main_pid(UNTOUCHED) == pids[UNTOUCHED]
    assert UNTOUCHED not in roll.stats or roll.stats[UNTOUCHED]["changed"] == 0
    roll.assert_one_batch_at_most()


def test_a_host_failing_its_health_gate_is_rolled_back_and_stops_the_roll(broken_roll, release_a):
    roll, pids = broken_roll
    assert_failed_and_rolled_back(roll, pids, release_a, "warmup")
    assert release(HOSTS[0]) != release_a[HOSTS[0]]
    assert "upgraded: %s;" % HOSTS[0] in roll.messages, roll.messages


def test_a_healthy_but_slow_host_fails_the_throughput_gate_the_same_way(slow_roll, release_a):
    roll, pids = slow_roll
    assert_failed_and_rolled_back(roll, pids, release_a, "throughput")
    # Its arguments are the inventory's again, as before the roll.
    written = docker(FAILING, "cat /etc/systemd/system/sglang-server.service /etc/sglang/sglang-server.yaml")
    assert re.search(r"cuda-graph-max-bs\W+128", written) and not re.search(r"cuda-graph-max-bs\W+64", written), written
    # The host already on B kept serving untouched.
    assert main_pid(HOSTS[0]) == pids[HOSTS[0]]


def test_site_with_a_changed_pin_rolls_and_converges_every_host_one_at_a_time(site_new_pin):
    assert site_new_pin.rc == 0, site_new_pin.tail
    # Every host was serving, none new: the play of the new ones matched no host, silently.
    assert site_new_pin.report["warnings"] == []
    releases = dict((host, release(host)) for host in HOSTS)
    assert all(releases[one] == releases[other] for one, other in SAME_DISTRO), releases
    before = site_new_pin.releases_before
    assert not set(releases.values()) & set(before.values()), (releases, before)
    assert all(health(host) == "200" for host in HOSTS)
    site_new_pin.assert_one_batch_at_most()
    # The hosts went down one after another: each outage ended before the next one began (site.yml's
    # group of serving hosts is in the order the hosts reached it, not the inventory's).
    outages = []
    for host in HOSTS:
        down = [stamp for stamp, up in samples(host, site_new_pin.started) if not up and stamp <= site_new_pin.ended]
        assert down, "%s never restarted for the new pin" % host
        outages.append((min(down), max(down)))
    outages.sort()
    assert all(outages[i][1] < outages[i + 1][0] for i in range(len(outages) - 1)), outages


def test_the_fleet_report_reads_every_host_without_changing_it(site_new_pin):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fleet.json")
        rc, stats, messages, tail, dummy = ansible_playbook("verify.yml", "-e", "verify_report_path=" + path)
        assert rc == 0, tail
        with open(path) as handle:
            report = json.load(handle)
    assert all(stats[host]["changed"] == 0 for host in HOSTS), stats
    rows = dict((row["host"], row) for row in report["hosts"])
    assert sorted(rows) == HOSTS
    for host in HOSTS:
        row = rows[host]
        assert os.path.basename(row["release"]) == release(host)
        assert row["server"]["status"] == "healthy", row["server"]
        assert row["throughput"]["tokens_per_second"] > 0 and row["throughput"]["passed"] is True
        assert row["gpus"]["count"] == 0
    assert report["table"][0].split()[:3] == ["host", "toolkit", "stack"]


def check_results(report):
    """Per host, the result of the fast path's comparison with the record (playbooks/converged.yml)."""
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            if task["task"]["name"] == "Compare the node with the record of its last converge":
                return task["hosts"]
    return {}


def roles_run(report):
    """Per host, the collection's roles that ran a task (not skipped), the check play's aside (it
    reads every role's input on every run)."""
    ran = collections.defaultdict(set)
    for play in report.get("plays", []):
        if play["play"]["name"] == "Check every role's input before any change":
            continue
        for task in play.get("tasks", []):
            role, sep, dummy = task["task"]["name"].partition(" : ")
            if sep and role.startswith("inferops.gpu."):
                for host, result in task["hosts"].items():
                    if not result.get("skipped"):
                        ran[host].add(role[len("inferops.gpu."):])
    return dict(ran)


def node_roles(ran, host):
    """The roles of a node's data flow that ran on host (the rolling and node roles, which run them, aside)."""
    return sorted(ran.get(host, set()) - {"rolling", "node"})


@pytest.fixture(scope="module")
def server_args_roll(site_new_pin):
    pid, was = main_pid(UNTOUCHED), release(UNTOUCHED)
    roll = Roll("playbooks/rolling.yml", "-e", "ml_env_profile=ci-c", "-l", UNTOUCHED, host_vars={UNTOUCHED: NEW_ARGS})
    return roll, pid, was


def test_a_roll_of_the_server_arguments_runs_only_the_server_role_behind_its_gates(server_args_roll):
    roll, pid, was = server_args_roll
    assert roll.rc == 0, roll.tail
    checked = check_results(roll.report)[UNTOUCHED]
    assert checked["pending"] == ["gpu_health", "sglang_server"], checked
    assert "sglang_server: its input changed" in checked["drift"], checked
    ran = roles_run(roll.report)
    assert node_roles(ran, UNTOUCHED) == ["gpu_health", "sglang_server"], ran
    # Behind the same gates: the server restarted on the new arguments, passed its health and
    # throughput gates, on the release it had.
    assert main_pid(UNTOUCHED) != pid and health(UNTOUCHED) == "200" and release(UNTOUCHED) == was
    written = docker(UNTOUCHED, "cat /etc/systemd/system/sglang-server.service /etc/sglang/sglang-server.yaml")
    assert re.search(r"cuda-graph-max-bs\W+64", written), written
    assert "upgraded: %s;" % UNTOUCHED in roll.messages, roll.messages
    # The throughput gate ran (an include reports no host result: its module task does).
    assert any(task["task"]["name"] == "inferops.gpu.sglang_server : Measure the throughput against the baseline"
               and UNTOUCHED in task["hosts"] and not task["hosts"][UNTOUCHED].get("skipped")
               for play in roll.report["plays"] for task in play["tasks"])
    roll.assert_one_batch_at_most()


@pytest.fixture(scope="module")
def drift(server_args_roll):
    docker(HOSTS[0], "echo EDITED=1 >> /etc/inferops/runtime-env.env")
    pid = main_pid(HOSTS[0])
    roll = Roll("site.yml", "-e", "ml_env_profile=ci-c", "-l", HOSTS[0])
    return roll, pid


def test_drift_sends_a_node_through_the_role_that_owns_it_and_those_after(drift):
    roll, pid = drift
    assert roll.rc == 0, roll.tail
    checked = check_results(roll.report)[HOSTS[0]]
    assert not checked["converged"], checked
    assert "/etc/inferops/runtime-env.env: its content changed" in checked["drift"], checked
    assert checked["pending"] == ["runtime_env", "gpu_health", "sglang_server"], checked
    assert node_roles(roles_run(roll.report), HOSTS[0]) == ["gpu_health", "runtime_env", "sglang_server"]
    # The role put the file back as it was, so the server had nothing new to run.
    assert docker(HOSTS[0], "grep -c EDITED=1 /etc/inferops/runtime-env.env") == "0"
    assert main_pid(HOSTS[0]) == pid and health(HOSTS[0]) == "200"


@pytest.fixture(scope="module")
def switch(drift):
    pid = main_pid(FAILING)
    # The collection's own rotation (copytruncate) takes the start marker and the ready line out of
    # the log the server keeps writing: the server's readiness must not hang on them.
    docker(FAILING, "logrotate -f /etc/logrotate.d/sglang-server")
    assert "server_args=" not in docker(FAILING, "cat /var/log/sglang/sglang-server.log")
    roll = Roll("site.yml", "-e", "ml_env_profile=ci-c", "-e", "inferops_fast_path=false", "-l", FAILING)
    return roll, pid


def test_the_switch_sends_a_converged_node_through_every_role_even_after_a_log_rotation(switch):
    roll, pid = switch
    assert roll.rc == 0, roll.tail
    checked = check_results(roll.report)[FAILING]
    # The node matched its record; the switch sent it through the roles all the same.
    assert checked["converged"], checked
    assert node_roles(roles_run(roll.report), FAILING) == ["gpu_health", "ml_env", "runtime_env", "sglang_server"]
    # A node with nothing to change kept its server running.
    assert main_pid(FAILING) == pid and health(FAILING) == "200"
    assert roll.stats[FAILING]["changed"] == 0, roll.stats
    roll.assert_one_batch_at_most()


def test_a_no_op_site_run_over_the_converged_fleet_runs_no_role_task(switch):
    pids = dict((host, main_pid(host)) for host in HOSTS)
    roll = Roll("site.yml", "-e", "ml_env_profile=ci-c", host_vars={UNTOUCHED: NEW_ARGS})
    assert roll.rc == 0, roll.tail
    checked = check_results(roll.report)
    assert sorted(checked) == HOSTS and all(result["converged"] for result in checked.values()), checked
    assert roles_run(roll.report) == {}
    assert all(roll.stats[host]["changed"] == 0 for host in HOSTS), roll.stats
    # No host was pending, new or serving: the plays of those groups matched no host, silently.
    assert roll.report["warnings"] == []
    assert dict((host, main_pid(host)) for host in HOSTS) == pids


def test_a_bad_fast_path_switch_is_refused_before_any_change(switch):
    roll = Roll("site.yml", "-e", "ml_env_profile=ci-c", "-e", "inferops_fast_path=maybe", "-l", HOSTS[0])
    assert roll.rc != 0
    assert 'inferops_fast_path = "maybe" is not allowed: a boolean (true or false)' in roll.messages, roll.tail
    assert roll.stats[HOSTS[0]]["changed"] == 0 and roles_run(roll.report) == {}


def vaulted(name, value, password_file):
    """name: !vault ... as ansible-vault writes it, for a YAML inventory."""
    out = subprocess.run(["ansible-vault", "encrypt_string", "--vault-password-file", password_file, "--name", name,
                          value], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def served_models(host, key):
    """(HTTP status, body) of the host's /v1/models with key."""
    out = docker(host, "curl -s -w ' %%{http_code}' --max-time 30 -H 'Authorization: Bearer %s' "
                       "http://127.0.0.1:30000/v1/models" % key)
    body, dummy, status = out.rpartition(" ")
    return status, body


@pytest.fixture(scope="module")
def rotation(switch):
    """Issue 41: the same inventory text, a vaulted key rotated and a referenced variable changed, then unchanged."""
    host = UNTOUCHED
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        password = os.path.join(tmp, "vault-password")
        with open(password, "w") as handle:
            handle.write("molecule-vault-password\n")
        for key, model in (("sk-rotate-one", "standin-model"), ("sk-rotate-two", "standin-model-two"),
                           ("sk-rotate-two", "standin-model-two")):
            inventory = os.path.join(tmp, "vaulted.yml")
            with open(inventory, "w") as handle:
                handle.write("all:\n  hosts:\n    %s:\n" % host)
                handle.write("".join("      %s\n" % line for line in vaulted("vault_standin_key", key, password).splitlines()))
                handle.write("      standin_model: %s\n" % model)
                handle.write("      sglang_server_api_key: '{{ vault_standin_key }}'\n")
                handle.write("      sglang_server_served_model_name: '{{ standin_model }}'\n")
                handle.write("      sglang_server_args: %s\n" % json.dumps(NEW_ARGS["sglang_server_args"]))
            pid = main_pid(host)
            roll = Roll("site.yml", "-e", "ml_env_profile=ci-c", "-l", host, "-i", inventory,
                        "--vault-password-file", password)
            runs.append((roll, pid, main_pid(host), served_models(host, "sk-rotate-one"),
                         served_models(host, "sk-rotate-two")))
    return runs


def test_a_rotated_vault_value_or_a_changed_reference_rolls_the_node_and_an_unchanged_inventory_skips_it(rotation):
    (first, dummy, dummy, one, dummy), (second, before, after, old, new), (third, pid, still, dummy, again) = rotation
    assert first.rc == 0 and one[0] == "200", first.tail
    # The inventory's text is the same as the first run's: only the vaulted key and the referenced name differ.
    assert second.rc == 0, second.tail
    checked = check_results(second.report)[UNTOUCHED]
    assert not checked["converged"] and "sglang_server: its input changed" in checked["drift"], checked
    assert checked["pending"] == ["gpu_health", "sglang_server"], checked
    assert node_roles(roles_run(second.report), UNTOUCHED) == ["gpu_health", "sglang_server"]
    # The server restarted and serves the new values: the old key is refused, the new one names the new model.
    assert after != before and old[0] == "401" and new[0] == "200" and "standin-model-two" in new[1], (old, new)
    second.assert_one_batch_at_most()
    # The same inventory again: the fast path, no role, the same server.
    assert third.rc == 0 and check_results(third.report)[UNTOUCHED]["converged"], third.tail
    assert roles_run(third.report) == {} and still == pid and again[0] == "200"
    # No key in clear anywhere in what the runs printed.
    for roll in (first, second, third):
        assert "sk-rotate" not in json.dumps(roll.report) + roll.tail


def task_result(report, name, host):
    """(result, seconds) of the named task on host."""
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            if task["task"]["name"] == name and host in task["hosts"]:
                duration = task["task"].get("duration", {})
                stamps = [datetime.datetime.strptime(duration[key], "%Y-%m-%dT%H:%M:%S.%fZ")
                          for key in ("start", "end") if duration.get(key)]
                seconds = (stamps[1] - stamps[0]).total_seconds() if len(stamps) == 2 else None
                return task["hosts"][host], seconds
    return None, None


@pytest.fixture(scope="module")
def taken_port_roll(switch):
    host = HOSTS[0]
    before = (main_pid(host), docker(host, "cat /var/log/sglang/revision"))
    docker(host, "systemd-run --unit=foreign-listener python3 -m http.server 30001 --bind 127.0.0.1")
    for dummy in range(50):
        if docker(host, "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 30001), 1)' && echo up") == "up":
            break
        time.sleep(0.2)
    try:
        roll = Roll("playbooks/rolling.yml", "-e", "ml_env_profile=ci-c", "-l", host, host_vars={host: {"sglang_server_port": 30001}})
    finally:
        docker(host, "systemctl stop foreign-listener")
    return roll, before


def test_a_roll_refused_by_the_preflight_leaves_the_old_server_running_untouched(taken_port_roll):
    roll, (pid, revision) = taken_port_roll
    host = HOSTS[0]
    assert roll.rc != 0, roll.tail
    assert "%s failed and was rolled back" % host in roll.messages, roll.messages
    # The preflight named the port and its holder.
    assert "30001" in roll.messages and "http.server" in roll.messages, roll.messages
    # Nothing had changed, so the rollback changed nothing: the old server, never restarted, serves on
    # its own port with its own key, and its revision file has its bytes.
    assert main_pid(host) == pid and health(host) == "200", roll.tail
    assert docker(host, "cat /var/log/sglang/revision") == revision
    restored, seconds = task_result(roll.report, "inferops.gpu.sglang_server : Bring back the previous server behind "
                                                 "the health gate, unless it still runs", host)
    assert restored is not None and restored.get("changed") is False and restored.get("ready") is True, restored
    assert seconds is not None and seconds <= 20, seconds


@pytest.fixture(scope="module")
def typo_rolls(taken_port_roll):
    """The same typo twice: as a roll runs it (its check play judges it in the release there, which is the one that
    would serve), and past the check play (rolling_validated, as site.yml hands its roll), where the start judges it
    before anything is written or stopped."""
    host = HOSTS[0]
    before = (main_pid(host), docker(host, "cat /var/log/sglang/revision"))
    typo = {host: {"sglang_server_args": ["--tp-sizee", "1", "--cuda-graph-max-bs", "128"]}}
    checked = Roll("playbooks/rolling.yml", "-e", "ml_env_profile=ci-c", "-l", host, host_vars=typo)
    started = Roll("playbooks/rolling.yml", "-e", "ml_env_profile=ci-c", "-e", "rolling_validated=true", "-l", host,
                   host_vars=typo)
    return checked, started, before


def test_arguments_the_release_sglang_refuses_never_stop_the_serving_node(typo_rolls):
    """Issue 41: SGLang's own parser judges the command line before any host changes, and again before the start."""
    checked, started, (pid, revision) = typo_rolls
    host = HOSTS[0]
    refused = 'sglang_server_args[0] = "--tp-sizee" is not allowed: an argument the release\'s sglang 0.5.9 takes'
    for roll in (checked, started):
        assert roll.rc != 0, roll.tail
        assert refused in roll.messages and "unrecognized arguments: --tp-sizee 1" in roll.messages, roll.messages
        roll.assert_one_batch_at_most()
    # The check play refused it: no role ran. Past it, the start refused it and the rollback left the server alone.
    assert roles_run(checked.report) == {}, roles_run(checked.report)
    assert "%s failed and was rolled back" % host in started.messages, started.messages
    assert main_pid(host) == pid and health(host) == "200" and docker(host, "cat /var/log/sglang/revision") == revision
