"""Rolls over four serving hosts, in order, while each host samples its own /health_generate.

1. Roll to release B with the third host given a broken server environment: it fails its health
   gate, goes back to A healthy, the roll stops, the fourth host is untouched.
2. Roll to B with the third host healthy but slow: the throughput gate fails it the same way.
3. A clean roll to B converges every host (the scenario's idempotence step has shown that site.yml
   on the serving fleet restarts nothing). 4. site.yml with a changed pin (release C) rolls the
   serving fleet one host at a time. 5. verify.yml reports every host without changing it.
6. The fast path: a hand-edited file sends its node through the roles, which put it back, and
   inferops_fast_path=false sends a converged node through them (a no-op roll restarts nothing);
   then a no-op site.yml over the converged fleet runs no role task at all; a bad switch is refused.
Through all of it, at no sample time is more than one host (one batch) out of service.
"""

import collections
import json
import os
import subprocess
import tempfile
import time

import pytest

PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd())
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
HOSTS = ["inferops-roll-%d" % n for n in range(1, 5)]
# A release's name covers the interpreter it was built with: the Debian 12 hosts (1 and 3, Python
# 3.11) share one release of a pin set, the Debian 13 hosts (2 and 4, Python 3.13) another.
SAME_DISTRO = [(HOSTS[0], HOSTS[2]), (HOSTS[1], HOSTS[3])]
THIRD = HOSTS[2]
# A sample counts a host as down when it did not answer 200; at most this many at once (serial 1).
BATCH = 1
TOKEN_TIME = {"SGLANG_STANDIN_TOKEN_SECONDS": "0.02"}  # molecule.yml's, kept in the third host's override


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
                host_vars={THIRD: {"sglang_server_extra_environment": dict(TOKEN_TIME, SGLANG_STANDIN_FAULT="warmup_failed")}})
    return roll, pids


@pytest.fixture(scope="module")
def slow_roll(broken_roll):
    pids = dict((host, main_pid(host)) for host in HOSTS)
    # Limited to the third host and the one after it: the first two are on B already.
    roll = Roll("playbooks/rolling.yml", "-e", "ml_env_profile=ci-b", "-l", ",".join(HOSTS[2:]),
                host_vars={THIRD: {"sglang_server_extra_environment": dict(TOKEN_TIME, SGLANG_STANDIN_FAULT="slow")}})
    return roll, pids


@pytest.fixture(scope="module")
def clean_roll(slow_roll):
    roll = Roll("playbooks/rolling.yml", "-e", "ml_env_profile=ci-b")
    roll.releases = dict((host, release(host)) for host in HOSTS)
    return roll


@pytest.fixture(scope="module")
def site_new_pin(clean_roll):
    return Roll("site.yml", "-e", "ml_env_profile=ci-c")


def assert_failed_on_third_and_rolled_back(roll, pids, release_a, cause):
    assert roll.rc != 0, roll.tail
    assert "%s failed and was rolled back" % THIRD in roll.messages, roll.messages
    assert cause in roll.messages, roll.messages
    assert "rolled back: %s; untouched: %s" % (THIRD, HOSTS[3]) in roll.messages, roll.messages
    # The failed host is back on A and serving; the host after it was never touched.
    assert release(THIRD) == release_a[THIRD] and health(THIRD) == "200"
    # The files came back as they were: owner, group and mode too (the service user reads them).
    for path in ("/etc/inferops/runtime-env.json", "/etc/inferops/runtime-env.env",
                 "/etc/sglang/sglang-server.env", "/etc/sglang/sglang-server.yaml", "/var/log/sglang/revision"):
        assert docker(THIRD, "stat -c '%U:%G %a' " + path) == docker(HOSTS[3], "stat -c '%U:%G %a' " + path), path
    assert release(HOSTS[3]) == release_a[HOSTS[3]] and main_pid(HOSTS[3]) == pids[HOSTS[3]]
    assert HOSTS[3] not in roll.stats or roll.stats[HOSTS[3]]["changed"] == 0
    roll.assert_one_batch_at_most()


def test_a_host_failing_its_health_gate_is_rolled_back_and_stops_the_roll(broken_roll, release_a):
    roll, pids = broken_roll
    assert_failed_on_third_and_rolled_back(roll, pids, release_a, "warmup")
    assert release(HOSTS[0]) != release_a[HOSTS[0]] and release(HOSTS[1]) != release_a[HOSTS[1]]
    assert "upgraded: %s, %s" % (HOSTS[0], HOSTS[1]) in roll.messages


def test_a_healthy_but_slow_host_fails_the_throughput_gate_the_same_way(slow_roll, release_a):
    roll, pids = slow_roll
    assert_failed_on_third_and_rolled_back(roll, pids, release_a, "throughput")
    # The hosts already on B kept serving untouched.
    assert main_pid(HOSTS[0]) == pids[HOSTS[0]] and main_pid(HOSTS[1]) == pids[HOSTS[1]]


def test_a_clean_roll_converges_every_host(clean_roll):
    assert clean_roll.rc == 0, clean_roll.tail
    assert all(release(one) == release(other) for one, other in SAME_DISTRO)
    assert all(health(host) == "200" for host in HOSTS)
    clean_roll.assert_one_batch_at_most()


def test_site_with_a_changed_pin_rolls_one_host_at_a_time(site_new_pin, clean_roll):
    assert site_new_pin.rc == 0, site_new_pin.tail
    releases = dict((host, release(host)) for host in HOSTS)
    assert all(releases[one] == releases[other] for one, other in SAME_DISTRO), releases
    assert not set(releases.values()) & set(clean_roll.releases.values()), (releases, clean_roll.releases)
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


def role_tasks_run(report):
    """Per host, how many tasks of the collection's roles ran (not skipped)."""
    ran = collections.Counter()
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            if task["task"]["name"].startswith("inferops.gpu."):
                for host, result in task["hosts"].items():
                    ran[host] += 0 if result.get("skipped") else 1
    return dict((host, count) for host, count in ran.items() if count)


@pytest.fixture(scope="module")
def drift_and_switch(site_new_pin):
    docker(HOSTS[0], "echo EDITED=1 >> /etc/inferops/runtime-env.env")
    pids = dict((host, main_pid(host)) for host in HOSTS)
    roll = Roll("site.yml", "-e", "ml_env_profile=ci-c", "-e", "inferops_fast_path=false", "-l", ",".join(HOSTS[:2]))
    return roll, pids


def test_drift_and_the_switch_send_a_node_through_the_roles(drift_and_switch):
    roll, pids = drift_and_switch
    assert roll.rc == 0, roll.tail
    checked = check_results(roll.report)
    assert not checked[HOSTS[0]]["converged"], checked[HOSTS[0]]
    assert "/etc/inferops/runtime-env.env: its content changed" in checked[HOSTS[0]]["drift"], checked[HOSTS[0]]
    # The second node matched its record; the switch sent it through the roles all the same.
    assert checked[HOSTS[1]]["converged"], checked[HOSTS[1]]
    ran = role_tasks_run(roll.report)
    assert ran.get(HOSTS[0], 0) > 50 and ran.get(HOSTS[1], 0) > 50, ran
    # The roles put the file back; a node with nothing to change kept its server running.
    assert docker(HOSTS[0], "grep -c EDITED=1 /etc/inferops/runtime-env.env") == "0"
    assert main_pid(HOSTS[1]) == pids[HOSTS[1]]
    assert roll.stats[HOSTS[1]]["changed"] == 0, roll.stats
    assert all(health(host) == "200" for host in HOSTS[:2])
    roll.assert_one_batch_at_most()


def test_a_no_op_site_run_over_the_converged_fleet_runs_no_role_task(drift_and_switch):
    pids = dict((host, main_pid(host)) for host in HOSTS)
    roll = Roll("site.yml", "-e", "ml_env_profile=ci-c")
    assert roll.rc == 0, roll.tail
    checked = check_results(roll.report)
    assert sorted(checked) == HOSTS and all(result["converged"] for result in checked.values()), checked
    assert role_tasks_run(roll.report) == {}
    assert all(roll.stats[host]["changed"] == 0 for host in HOSTS), roll.stats
    assert dict((host, main_pid(host)) for host in HOSTS) == pids


def test_a_bad_fast_path_switch_is_refused_before_any_change(drift_and_switch):
    roll = Roll("site.yml", "-e", "ml_env_profile=ci-c", "-e", "inferops_fast_path=maybe", "-l", HOSTS[0])
    assert roll.rc != 0
    assert "inferops_fast_path must be a boolean (true or false), got maybe" in roll.messages, roll.tail
    assert roll.stats[HOSTS[0]]["changed"] == 0 and role_tasks_run(roll.report) == {}
