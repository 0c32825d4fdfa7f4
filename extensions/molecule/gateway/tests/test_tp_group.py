"""The two nodes as one multi-node TP group (issue 30), after test_gateway.py: one model over both hosts.

The inventory gains a group tp_kimi of both nodes (sglang_server_tp_group, --tp 2: one rank on each), as an
operator adds one. The stand-in's ranks meet over the scenario's network at rank 0's --dist-init-addr
(inferops-gw-1:50000), as torch's TCP store does, and rank 0 sends every request to the other node's rank.
1. The gateway is re-provisioned: it knows only rank 0. rolling.yml then rolls the group as one batch
   member: both restarted together with --nnodes 2 and their ranks, rank 0 gated on the full readiness
   contract, rank 1 on its dummy health server and its line; requests through the gateway are served.
2. verify.yml shows the group as a group.
3. A roll of the group's arguments whose follower crashes in its start (its rank killed): the group fails
   naming the follower, its host and its cause, and both members are rolled back to the revision they
   served, serving again; never a group with its members on different revisions.
"""

import json
import os
import threading
import time

import pytest

from test_gateway import GATEWAY, KEY, NODE_KEY, NODES, PROJECT, URL, ansible_playbook, docker, started_at

GROUP = "tp_kimi"
# sglang 0.5.23's names (molecule.yml); --tp 2 over 2 nodes is one rank on each.
GROUP_ARGS = ["--tp", "2", "--cuda-graph-max-bs-decode", "128", "--disable-custom-all-reduce"]
NEW_GROUP_ARGS = ["--tp", "2", "--cuda-graph-max-bs-decode", "64", "--disable-custom-all-reduce"]
GENERATE = ("curl -s -o /dev/null -w '%%{http_code}' -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' "
            "-d '{\"text\": \"Hi\", \"sampling_params\": {\"max_new_tokens\": 4}}' http://127.0.0.1:30080/generate" % NODE_KEY)
FOLLOWER_LINE = "Dummy health check server started in background thread at"


def playbook(name, *args, args_of_group=None):
    """(rc, failure messages, output tail) of a run with the group in the inventory. Its settings are the members'
    host variables here: molecule's group_vars files of blackwell rank above an inventory file's group variables."""
    # The group is the gateway's only worker: its drain leaves none in rotation, which the roll allows only when
    # told (rolling_gateway_min_in_rotation 0, as a fleet of one group sets it).
    settings = {"sglang_server_tp_group": GROUP, "sglang_server_args": args_of_group or GROUP_ARGS,
                "rolling_gateway_min_in_rotation": 0}
    rc, stats, messages, tail = ansible_playbook(name, *args, host_vars=dict((node, settings) for node in NODES),
                                                 children={GROUP: {"hosts": dict((node, {}) for node in NODES)}})
    return rc, messages, tail


def exec_start(node):
    """The unit file's command line (systemctl show adds the last start's times and PID)."""
    return docker(node, "grep '^ExecStart=' /etc/systemd/system/sglang-server.service")


def revision(node):
    return docker(node, "cat /var/log/sglang/revision")


def workers():
    listed = json.loads(docker(GATEWAY, "curl -s -H 'Authorization: Bearer %s' http://127.0.0.1:30080/workers" % KEY))
    return sorted(w["url"] for w in listed["workers"])


def served_through_the_gateway():
    for dummy in range(60):
        if docker(GATEWAY, GENERATE) == "200":
            return True
        time.sleep(1)
    return False


@pytest.fixture(scope="module")
def formed():
    before = dict((node, started_at(node)) for node in NODES)
    gateway = playbook("site.yml", "-l", "sglang_gateway")
    roll = playbook("playbooks/rolling.yml", "-e", "ml_env_profile=ci-b")
    return gateway, roll, before


def test_the_group_starts_and_is_gated_as_one_and_the_gateway_knows_only_rank_0(formed):
    gateway, (rc, messages, tail), before = formed
    assert gateway[0] == 0, gateway[2]
    assert rc == 0, tail
    for rank, node in enumerate(NODES):
        argv = exec_start(node)
        assert "--nnodes 2 --node-rank %d --dist-init-addr inferops-gw-1:50000" % rank in argv, argv
        assert started_at(node) > before[node]  # restarted, both in the one batch
    follower_log = docker(NODES[1], "cat /var/log/sglang/sglang-server.log")
    assert FOLLOWER_LINE in follower_log
    assert "The server is fired up and ready to roll!" in docker(NODES[0], "cat /var/log/sglang/sglang-server.log")
    assert workers() == [URL[NODES[0]]]
    assert served_through_the_gateway()
    # rank 0's requests reach the follower's rank: with it gone, rank 0 cannot serve (test 3 shows the crash).


def test_the_fleet_report_shows_the_group(formed, tmp_path):
    report = tmp_path / "report.json"
    rc, messages, tail = playbook("verify.yml", "-e", "verify_report_path=%s" % report)
    assert rc == 0, tail
    rows = json.loads(report.read_text())["hosts"]
    assert [row["host"] for row in rows] == NODES
    assert [row["group"] for row in rows] == [{"name": GROUP, "rank": rank, "nnodes": 2, "leader": NODES[0]} for rank in range(2)]
    assert rows[1]["gateway"]["state"] == "through rank 0"
    assert rows[0]["gateway"]["state"] == "in rotation"


LOADS = "grep -c 'Load weight begin' /var/log/sglang/sglang-server.log"


def kill_the_followers_next_start(node, loads_before, found, done):
    """Once the node's next start has joined the group (its rank loads weights after the rendezvous), SIGKILL
    its rank: a crash in the roll's start, before the follower is ready, that rank 0 sees. Ends with the roll."""
    while not done.is_set():
        if int(docker(node, LOADS) or 0) > loads_before:
            pid = docker(node, "systemctl show -p MainPID --value sglang-server")
            ranks = docker(node, "pgrep -P %s" % pid).split() if pid not in ("0", "") else []
            if ranks:
                docker(node, "kill -9 %s" % " ".join(ranks))
                found.append((pid, ranks))
                return
        time.sleep(0.2)


def test_a_follower_crash_fails_the_group_and_rolls_back_every_member(formed):
    before = dict((node, (revision(node), exec_start(node))) for node in NODES)
    killed, done = [], threading.Event()
    killer = threading.Thread(target=kill_the_followers_next_start, daemon=True,
                              args=(NODES[1], int(docker(NODES[1], LOADS) or 0), killed, done))
    killer.start()
    try:
        rc, messages, tail = playbook("playbooks/rolling.yml", "-e", "ml_env_profile=ci-b", args_of_group=NEW_GROUP_ARGS)
    finally:
        done.set()
        killer.join(timeout=30)
    assert killed, "the follower's start was never seen: %s" % tail
    # For the record (docs, notes): what the operator reads.
    path = os.path.join(PROJECT, ".build", "logs", "tp-group-failure.txt")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(messages + "\n")
    assert rc != 0, tail
    # Every member fails naming the follower, its host and its cause (rank 0 lost its peer); each is rolled back.
    assert "group %s did not start:" % GROUP in messages and "rank 1 (%s) cause " % NODES[1] in messages, messages
    for node in NODES:
        assert "%s failed and was rolled back" % node in messages, messages
    # Both back on the revision and arguments they served before, serving: never members on different revisions.
    for node in NODES:
        assert (revision(node), exec_start(node)) == before[node], node
        assert docker(node, "systemctl is-active sglang-server") == "active"
    assert "--cuda-graph-max-bs-decode 128" in exec_start(NODES[1])
    assert served_through_the_gateway()
    assert workers() == [URL[NODES[0]]]
