"""SGLang's model gateway (smg) in front of two stand-in nodes, under a bounded client load.

The client sends 5 requests a second (at most 3000) through the gateway from the gateway host, with
the API key the nodes and the gateway share (smg's --api-key); a
monitor records the gateway's view of its workers every 0.25 s. The scenario's gateway does not
retry (retry_max_retries 1) and health-checks its nodes every 30 s, as a fleet's gateway does, so a
request that reaches a node while it restarts fails: the drain, not a retry or a health check, is what
keeps the client's failures at zero.

1. The role: a non-root, hardened unit bound to the configured addresses, the keys in a 0600 file
   and never in argv, the inventory's two nodes as workers, Prometheus metrics.
2. One roll to release B, both paths of a node in it: the first node is upgraded (out of rotation
   from before its restart until after its gates), the second fails its health gate (rolled back,
   added back only once healthy again); zero failed requests, never fewer than one worker in
   rotation (all but the drained node). That a failed roll stops before the next node is the rolling
   scenario's test, on three hosts.
3. A roll of the first node's server arguments without the drain (rolling_gateway_host=''), and one
   with a copy of the collection that adds the node back before its gates: requests fail, so the
   zero-failure assertions of 2 can fail. A roll of the arguments alone restarts the server behind
   the same drain and gates as a new release (the fast path runs the health gate and the server role).
4. Check mode reports a changed setting of the gateway and changes nothing. Its retry policy
   and 1 s health checks switched on through the role (site.yml on the gateway host: its arguments changed, so it
   restarts). A node that hangs after it was ready: the gateway takes it out within its health
   window, the node restarts its server itself (liveness timer), it is back in rotation, and the
   client sees no failed request (the gateway retried the hung ones). A node that hangs right after
   its health gate passed, before the liveness timer's first probe of that run, is restarted too
   (the gate's pass armed the timer).
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd())
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
GATEWAY = "inferops-gw-gateway"
NODES = ["inferops-gw-%d" % n for n in range(1, 3)]
# Every node but the one drained stays in rotation through a roll.
IN_ROTATION = len(NODES) - 1
ALL_HEALTHY = '"healthy_workers":%d' % len(NODES)
URL = dict((node, "http://%s:30000" % node) for node in NODES)
KEY = "molecule-gateway-control-key"
NODE_KEY = "molecule-node-api-key"  # the nodes' sglang_server_api_key, which the gateway sends them
RATE, MOST = 5, 3000
# What each load saw, written to .build/logs/gateway-figures.json for the record (docs, notes).
FIGURES = {}


def docker(host, command, timeout=120):
    out = subprocess.run(["docker", "exec", host, "sh", "-c", command], capture_output=True, text=True,
                         timeout=timeout, check=False)
    return out.stdout.strip()


def ansible_playbook(playbook, *args, host_vars=None, children=None, timeout=1500, project=PROJECT, env=None):
    """(rc, per-host stats, failure messages, output tail) of one run against the scenario's inventory, with
    host_vars and groups (children) added in an inventory of their own."""
    argv = ["ansible-playbook", "-i", INVENTORY]
    with tempfile.TemporaryDirectory() as tmp:
        if host_vars or children:
            extra = os.path.join(tmp, "extra.json")
            with open(extra, "w") as handle:
                json.dump({"all": {"hosts": host_vars or {}, "children": children or {}}}, handle)
            argv += ["-i", extra]
        env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1", **(env or {}))
        proc = subprocess.run(argv + list(args) + [os.path.join(project, playbook)], cwd=PROJECT, env=env,
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
                if "upgraded:" in str(result.get("msg", "")):
                    messages.append("%s: %s" % (host, result["msg"]))
    return proc.returncode, report.get("stats", {}), "\n".join(messages), proc.stdout[-3000:] + proc.stderr[-2000:]


def started_at(node):
    """Epoch seconds of the node's current server start."""
    return float(docker(node, "date -d \"$(systemctl show -p ExecMainStartTimestamp --value sglang-server)\" +%s.%N"))


def release(node):
    return os.path.basename(docker(node, "readlink /opt/ml-env"))


def main_pid(node):
    return docker(node, "systemctl show -p MainPID --value sglang-server.service")


class Load:
    """The client load and the monitor on the gateway host, from start to stop."""
    count = 0

    def __init__(self):
        Load.count += 1
        self.client_log = "/var/log/gateway-client-%d.log" % Load.count
        self.monitor_log = "/var/log/gateway-monitor-%d.log" % Load.count
        docker(GATEWAY, "rm -f /run/gateway-load.stop")
        docker(GATEWAY, "systemd-run --unit=gateway-monitor-%d python3 /usr/local/bin/gateway-load monitor http://127.0.0.1:30080 %s %s"
               % (Load.count, KEY, self.monitor_log))
        time.sleep(1)
        self.started = time.time()
        # smg's --api-key is one shared key: clients send it, and the gateway sends it on to the nodes.
        docker(GATEWAY, "systemd-run --unit=gateway-client-%d python3 /usr/local/bin/gateway-load client http://127.0.0.1:30080 %s %d %d %s"
               % (Load.count, self.client_log, RATE, MOST, NODE_KEY))

    def stop(self):
        self.stopped = time.time()
        docker(GATEWAY, "touch /run/gateway-load.stop")
        for unit in ("gateway-client-%d" % Load.count, "gateway-monitor-%d" % Load.count):
            for dummy in range(120):
                if docker(GATEWAY, "systemctl is-active %s" % unit) != "active":
                    break
                time.sleep(0.5)
        self.requests = [json.loads(line) for line in docker(GATEWAY, "cat " + self.client_log).splitlines()]
        self.samples = [json.loads(line) for line in docker(GATEWAY, "cat " + self.monitor_log).splitlines()]
        return self

    def failed(self):
        return [r for r in self.requests if r["status"] != 200]

    def why(self):
        """What a failed zero-failure check needs to say: the failures by answer, their time span
        relative to the load's start, and the gateway's view of its workers at the worst moment."""
        failed = self.failed()
        if not failed:
            return "no failed request"
        kinds = {}
        for r in failed:
            kind = "%s %s" % (r["status"], (r["error"] or "")[:120])
            kinds[kind] = kinds.get(kind, 0) + 1
        fewest, when = self.fewest_in_rotation()
        sample = next((s for s in self.samples if s.get("time") == when), {})
        return "%d of %d requests failed, from +%.1f s to +%.1f s: %s; fewest workers in rotation %d at +%.1f s: %s" % (
            len(failed), len(self.requests), min(r["start"] for r in failed) - self.started,
            max(r["end"] for r in failed) - self.started, kinds, fewest, (when or self.started) - self.started,
            sample.get("workers"))

    def assert_failed_by_a_restart(self, why):
        """Some requests failed, and as a node that restarts fails them: upstream errors, not a refused key."""
        assert len(self.failed()) > 0, why
        assert all(r["status"] is None or r["status"] >= 500 for r in self.failed()), self.failed()[:3]

    def in_rotation(self, sample):
        return set(w["url"] for w in sample.get("workers", []) if w["healthy"] and w["status"] == "ready")

    def fewest_in_rotation(self):
        counts = [(len(self.in_rotation(s)), s["time"]) for s in self.samples if "workers" in s]
        return min(counts) if counts else (0, None)

    def out_windows(self, node):
        """[(first, last)] sample times of each run of samples without the node in rotation."""
        windows, first, last = [], None, None
        for sample in self.samples:
            if "workers" not in sample:
                continue
            if URL[node] in self.in_rotation(sample):
                if first is not None:
                    windows.append((first, last))
                first = None
            else:
                first = sample["time"] if first is None else first
                last = sample["time"]
        if first is not None:
            windows.append((first, last))
        return windows

    def assert_out_of_rotation_at(self, node, instant):
        assert any(first < instant < last for first, last in self.out_windows(node)), \
            "%s was in rotation at %.1f (out: %s)" % (node, instant, self.out_windows(node))


@pytest.fixture(scope="module", autouse=True)
def figures():
    yield
    path = os.path.join(PROJECT, ".build", "logs", "gateway-figures.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(FIGURES, handle, indent=2, sort_keys=True)


def record(name, load, **more):
    FIGURES[name] = dict(requests=len(load.requests), failed=len(load.failed()), seconds=round(load.stopped - load.started, 1),
                         fewest_in_rotation=load.fewest_in_rotation()[0],
                         failures=sorted(set(str(r["status"]) + " " + (r["error"] or "")[:80] for r in load.failed()))[:5], **more)


def run_under_load(playbook, *args, **kwargs):
    load = Load()
    result = ansible_playbook(playbook, *args, **kwargs)
    time.sleep(2)
    return result, load.stop()


# The server's arguments of the inventory, and a change of them alone: a restart with nothing else to do.
# molecule.yml's sglang_server_extra_environment, kept in the failing node's override.
NODE_ENVIRONMENT = {"SGLANG_STANDIN_VERSION": "0.5.23", "SGLANG_STANDIN_DRAIN_POLL_SECONDS": "1",
                    "SGLANG_STANDIN_TOKEN_SECONDS": "0.02", "SGLANG_HEALTH_CHECK_TIMEOUT": "3"}
# sglang 0.5.23's option names (molecule.yml): its argparse refuses --cuda-graph-max-bs as ambiguous.
ARGS = ["--tp", "1", "--cuda-graph-max-bs-decode", "128", "--disable-custom-all-reduce"]
NEW_ARGS = ["--tp", "1", "--cuda-graph-max-bs-decode", "64", "--disable-custom-all-reduce"]


@pytest.fixture(scope="module")
def roll():
    """Release B for both nodes; the second fails its health gate: one upgraded, one rolled back."""
    before = dict((node, started_at(node)) for node in NODES)
    releases = dict((node, release(node)) for node in NODES)
    (rc, stats, messages, tail), load = run_under_load(
        "playbooks/rolling.yml", "-e", "ml_env_profile=ci-b",
        host_vars={NODES[1]: {"sglang_server_extra_environment": dict(NODE_ENVIRONMENT, SGLANG_STANDIN_FAULT="warmup_failed")}})
    return rc, messages, tail, load, before, releases


def test_the_gateway_runs_hardened_with_its_keys_out_of_argv():
    pid = docker(GATEWAY, "systemctl show -p MainPID --value sglang-gateway")
    assert docker(GATEWAY, "systemctl is-active sglang-gateway") == "active"
    assert docker(GATEWAY, "stat -c %U /proc/" + pid) == "smg"
    cmdline = docker(GATEWAY, "tr '\\0' ' ' </proc/%s/cmdline" % pid)
    assert KEY not in cmdline and NODE_KEY not in cmdline, cmdline
    # smg's overload protection is off (roles/sglang_gateway/defaults/main.yml says why).
    assert "--disable-worker-overload-protection" in json.loads(docker(GATEWAY, "cat /etc/sglang-gateway/sglang-gateway.json"))["argv"]
    written = docker(GATEWAY, "cat /etc/systemd/system/sglang-gateway.service /etc/sglang-gateway/sglang-gateway.json")
    assert KEY not in written and NODE_KEY not in written
    assert docker(GATEWAY, "stat -c '%U %a' /etc/sglang-gateway/sglang-gateway.secrets.json") == "smg 600"
    unit = docker(GATEWAY, "systemctl show sglang-gateway -p User -p NoNewPrivileges -p ProtectSystem -p CapabilityBoundingSet")
    assert "User=smg" in unit and "NoNewPrivileges=yes" in unit and "ProtectSystem=strict" in unit
    # Bound where configured: loopback only, for the API (30080) and the metrics (29000).
    listeners = [line.split()[1] for line in docker(GATEWAY, "cat /proc/net/tcp /proc/net/tcp6").splitlines()[1:]
                 if line.split()[3] == "0A"]
    assert sorted(a for a in listeners if a.endswith((":7580", ":7148"))) == ["0100007F:7148", "0100007F:7580"], listeners
    assert "smg_" in docker(GATEWAY, "curl -s http://127.0.0.1:29000/metrics")
    # The workers come from the inventory; the control plane wants the key.
    workers = json.loads(docker(GATEWAY, "curl -s -H 'Authorization: Bearer %s' http://127.0.0.1:30080/workers" % KEY))
    assert sorted(w["url"] for w in workers["workers"]) == sorted(URL.values())
    assert docker(GATEWAY, "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30080/workers") == "401"
    # The nodes want their key, and so does the gateway from its clients (smg's --api-key is shared).
    assert docker(GATEWAY, "curl -s -o /dev/null -w '%{http_code}' http://inferops-gw-1:30000/v1/models") == "401"
    generate = ("curl -s -o /dev/null -w '%%{http_code}' %s -H 'Content-Type: application/json' "
                "-d '{\"text\": \"Hi\", \"sampling_params\": {\"max_new_tokens\": 1}}' http://127.0.0.1:30080/generate")
    assert docker(GATEWAY, generate % "") == "401"
    assert docker(GATEWAY, generate % ("-H 'Authorization: Bearer %s'" % NODE_KEY)) == "200"


def test_a_roll_through_the_gateway_fails_no_request(roll):
    rc, messages, tail, load, before, releases = roll
    record("roll: one node upgraded, one failing its gate", load)
    assert rc != 0, tail  # the second node failed
    assert len(load.requests) >= RATE * 30, len(load.requests)
    assert load.failed() == [], load.why()
    fewest, when = load.fewest_in_rotation()
    assert fewest >= IN_ROTATION, "only %d worker(s) in rotation at %s" % (fewest, when)
    assert docker(GATEWAY, "curl -s http://127.0.0.1:30080/readiness").count(ALL_HEALTHY) == 1


def test_an_upgraded_node_is_out_of_rotation_from_before_its_restart_until_after_its_gates(roll):
    rc, messages, tail, load, before, releases = roll
    upgraded = NODES[0]
    assert "upgraded: %s;" % upgraded in messages, messages
    assert release(upgraded) != releases[upgraded]
    start = started_at(upgraded)
    assert start > before[upgraded]  # restarted on the new release
    load.assert_out_of_rotation_at(upgraded, start)  # drained before, added back after its gates
    back = [s["time"] for s in load.samples if "workers" in s and URL[upgraded] in load.in_rotation(s) and s["time"] > start]
    assert back, "%s never came back into rotation" % upgraded


def test_a_node_failing_its_gate_is_rolled_back_then_added_back(roll):
    rc, messages, tail, load, before, releases = roll
    failing = NODES[1]
    assert "%s failed and was rolled back" % failing in messages, messages
    # Back on its release, restarted from it, and in rotation only after that restart.
    assert release(failing) == releases[failing]
    restored = started_at(failing)
    assert restored > before[failing]
    load.assert_out_of_rotation_at(failing, restored)
    back = [s["time"] for s in load.samples if "workers" in s and URL[failing] in load.in_rotation(s) and s["time"] > load.started]
    assert back and back[-1] > restored


def test_without_the_drain_a_roll_fails_requests(roll):
    # The first node keeps release B; only its server's arguments change, with no gateway.
    (rc, stats, messages, tail), load = run_under_load(
        "playbooks/rolling.yml", "-e", "ml_env_profile=ci-b", "-e", json.dumps({"sglang_server_args": NEW_ARGS}),
        "-e", "rolling_gateway_host=", "-l", NODES[0])
    record("one node's arguments rolled without the drain", load)
    assert rc == 0, tail
    assert "upgraded: %s;" % NODES[0] in messages, messages
    load.assert_failed_by_a_restart("no request failed without the drain: the zero-failure checks prove nothing")


MUTATION = ("""    - name: Drain the node
      ansible.builtin.include_tasks: "{{ rolling_drain_tasks }}\"""", """    - name: Add the node back before the gates (mutation)
      ansible.builtin.include_tasks: gateway.yml
      vars:
        rolling_phase: undrain
      when: rolling_gateway_host | length > 0

    - name: Drain the node
      ansible.builtin.include_tasks: "{{ rolling_drain_tasks }}\"""")


def test_readding_before_the_gates_fails_requests(roll, tmp_path):
    # A copy of the collection whose roll adds the node back right after the drain, before the
    # roles and the gates; the first node's arguments go back to the inventory's (a restart).
    copy = tmp_path / "ansible_collections" / "inferops" / "gpu"
    shutil.copytree(PROJECT, str(copy), ignore=shutil.ignore_patterns(".build", ".git", ".collections", "tests", "docs"))
    main = copy / "roles" / "rolling" / "tasks" / "main.yml"
    text = main.read_text()
    assert MUTATION[0] in text
    main.write_text(text.replace(MUTATION[0], MUTATION[1]))
    paths = os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(":")
    (rc, stats, messages, tail), load = run_under_load(
        "playbooks/rolling.yml", "-e", "ml_env_profile=ci-b", "-e", json.dumps({"sglang_server_args": ARGS}),
        "-l", NODES[0], project=str(copy),
        env={"ANSIBLE_COLLECTIONS_PATH": ":".join([str(tmp_path)] + [p for p in paths if not p.endswith("/.collections")])})
    record("one node added back before its gates (mutated copy)", load)
    assert rc == 0, tail
    assert "upgraded: %s;" % NODES[0] in messages, messages
    load.assert_failed_by_a_restart("no request failed when the node was added back before its gates")


def test_check_mode_reports_a_changed_setting_and_changes_nothing(roll):
    config = "cat /etc/sglang-gateway/sglang-gateway.json"
    before = (docker(GATEWAY, config), docker(GATEWAY, "systemctl show -p MainPID --value sglang-gateway"))
    rc, stats, messages, tail = ansible_playbook("site.yml", "-l", "sglang_gateway", "--check", "--diff",
                                                 "-e", "sglang_gateway_retry_max_retries=3")
    assert rc == 0 and stats[GATEWAY]["changed"] > 0, tail
    assert (docker(GATEWAY, config), docker(GATEWAY, "systemctl show -p MainPID --value sglang-gateway")) == before


@pytest.fixture(scope="module")
def retrying_gateway(roll):
    before = docker(GATEWAY, "systemctl show -p MainPID --value sglang-gateway")
    # A hung node's restart releases the requests it held all at once; smg then counted a burst of
    # failures against the node that stayed healthy and opened its circuit breaker (seen 2026-12-04:
    # "0/2 available (1 healthy)" for 3 s, every request refused). The breaker's threshold is raised
    # with the retries, so the retried requests, not the breaker, decide what the client sees.
    # Health checks every second (molecule.yml's 30 s are a fleet's): a hung node is taken out in seconds.
    rc, stats, messages, tail = ansible_playbook("site.yml", "-l", "sglang_gateway", "-e", "sglang_gateway_retry_max_retries=5",
                                                 "-e", "sglang_gateway_cb_failure_threshold=50",
                                                 "-e", "sglang_gateway_health_check_interval=1")
    after = docker(GATEWAY, "systemctl show -p MainPID --value sglang-gateway")
    return rc, stats, tail, before, after


def test_a_changed_setting_restarts_the_gateway(retrying_gateway):
    rc, stats, tail, before, after = retrying_gateway
    assert rc == 0 and stats[GATEWAY]["changed"] > 0, tail
    assert after != before
    argv = json.loads(docker(GATEWAY, "cat /etc/sglang-gateway/sglang-gateway.json"))["argv"]
    assert argv[argv.index("--retry-max-retries") + 1] == "5"


def gated_restart(node):
    """Restart the node's server through the module's health gate (its pass names this run of the
    unit in ready.json), with the liveness timer stopped: its first probe of this run comes only once
    the test starts the timer again, so a hang right after that is one no probe of its own saw ready."""
    docker(node, "systemctl stop sglang-server-liveness.timer")
    args = {"state": "restarted", "log_path": "/var/log/sglang/sglang-server.log", "port": 30000,
            "api_key": NODE_KEY, "served_model_name": "standin-model", "timeout": 120,
            "revision": docker(node, "cat /var/log/sglang/revision")}
    proc = subprocess.run(["ansible", "-i", INVENTORY, node, "-m", "inferops.gpu.sglang_server", "-a", json.dumps(args)],
                          cwd=PROJECT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for dummy in range(60):
        if docker(GATEWAY, "curl -s http://127.0.0.1:30080/readiness").count(ALL_HEALTHY):
            return
        time.sleep(1)
    raise AssertionError("the gateway did not see %s healthy again after its restart" % node)


def restarted_and_back(node, pid, seconds):
    """When the node's server runs under another main PID and the gateway sees every node healthy
    again (epoch seconds), or None after `seconds`."""
    for dummy in range(seconds):
        time.sleep(1)
        if main_pid(node) not in (pid, "0") and docker(GATEWAY, "curl -s http://127.0.0.1:30080/readiness").count(ALL_HEALTHY):
            return time.time()
    return None


def test_a_node_hanging_after_ready_is_taken_out_and_restarts_itself(retrying_gateway):
    node = NODES[-1]
    pid = main_pid(node)
    load = Load()
    time.sleep(3)
    hung = time.time()
    assert "froze" in docker(node, "python3 /opt/inferops-src/sglang_standin/hang_after_ready.py 30000 stop")
    back = restarted_and_back(node, pid, 120)
    time.sleep(2)
    load.stop()
    out = [w for w in load.out_windows(node) if w[1] >= hung]
    record("a node hangs after ready (retries on)", load, taken_out_after=round(out[0][0] - hung, 1) if out else None,
           back_after=round(back - hung, 1) if back else None)
    assert back is not None, "the hung node did not come back"
    # Its health window: 2 failed checks of up to 3 s, 1 s apart (retrying_gateway), 8 s; the rest is slack
    # for the monitor's 0.25 s samples on a busy machine.
    assert out and out[0][0] - hung <= 12, "the gateway took %s out after %s" % (node, out)
    journal = docker(node, "journalctl --no-pager -u sglang-server-liveness.service")
    assert "sglang liveness: restarting sglang-server.service after 3 failed /health_generate probes" in journal, journal[-2000:]
    # The requests the hung node held were retried on the others when it restarted.
    # On a failure: the gateway's breaker transitions and warnings, and the other node's liveness.
    breaker = ("journalctl --no-pager -u sglang-gateway --since '-90s' | grep -E 'circuit|WARN|ERROR|etry|gw-1' "
               "| grep -v 'path=/workers' | head -80")
    liveness = "journalctl --no-pager -u sglang-server-liveness.service --since '-90s' | tail -20"
    assert len(load.requests) >= RATE * 10 and load.failed() == [], "%s\ngateway: %s\n%s liveness: %s" % (
        load.why(), docker(GATEWAY, breaker), NODES[0], docker(NODES[0], liveness))


def test_a_hang_right_after_the_gate_passed_is_restarted_by_liveness(retrying_gateway):
    # No load here (the test above has it): the hang comes before the liveness timer's first probe of
    # this run, so only the gate's pass (ready.json naming the unit's invocation) can have armed it.
    node = NODES[0]
    gated_restart(node)
    pid = main_pid(node)
    hung = time.time()
    assert "froze" in docker(node, "python3 /opt/inferops-src/sglang_standin/hang_after_ready.py 30000 stop")
    docker(node, "systemctl start sglang-server-liveness.timer")
    back = restarted_and_back(node, pid, 90)
    journal = docker(node, "journalctl --no-pager -u sglang-server-liveness.service")
    # 3 failed probes 5 s apart, each 503 after SGLANG_HEALTH_CHECK_TIMEOUT (3 s), then the restart.
    assert back is not None and back - hung <= 60, "not restarted after its hang: %s" % journal[-2000:]
    assert "sglang liveness: sglang-server.service passed its health gate (invocation" in journal, journal[-2000:]
    assert "sglang liveness: restarting sglang-server.service after 3 failed /health_generate probes" in journal, journal[-2000:]


def test_the_fleet_report_shows_how_the_gateway_sees_each_node(tmp_path):
    module = ["-m", "inferops.gpu.sglang_gateway_worker", "-a",
              "gateway_url=http://127.0.0.1:30080 api_key=%s worker_api_key=%s worker_url=%s healthy_timeout=60 state=%%s"
              % (KEY, NODE_KEY, URL[NODES[0]])]
    argv = ["ansible", "-i", INVENTORY, GATEWAY] + module[:-1]
    drained = subprocess.run(argv + [module[-1] % "absent"], cwd=PROJECT, capture_output=True, text=True, timeout=300, check=False)
    assert drained.returncode == 0 and "CHANGED" in drained.stdout, drained.stdout[-2000:]
    report = tmp_path / "report.json"
    rc, stats, messages, tail = ansible_playbook("verify.yml", "-e", "verify_report_path=%s" % report)
    added = subprocess.run(argv + [module[-1] % "present"], cwd=PROJECT, capture_output=True, text=True, timeout=300, check=False)
    assert rc == 0, tail
    cells = dict((row["host"], row["gateway"]) for row in json.loads(report.read_text())["hosts"])
    assert sorted(cells) == NODES  # the gateway host is not a node of the report
    assert cells[NODES[0]]["state"] == "not registered"
    assert [cells[node]["state"] for node in NODES[1:]] == ["in rotation"] * (len(NODES) - 1)
    assert added.returncode == 0 and "CHANGED" in added.stdout, added.stdout[-2000:]
    assert ALL_HEALTHY in docker(GATEWAY, "curl -s http://127.0.0.1:30080/readiness")
