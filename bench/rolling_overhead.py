"""A roll's own cost per node: the per-role fast path against every role (issue 25).

The fleet of bench/converge.py (started and converged here when it is not) is rolled with
`rolling.yml`, serial 1, each roll changing only the server's arguments (`--cuda-graph-max-bs` 64,
then back to the inventory's 128), so every node restarts behind its gates. Two paths alternate,
RUNS rolls of each: the fast path per role (the default: the node runs the health gate and the
server role, whose input changed) and every role (`inferops_fast_path=false`, the path before).
The collection's own time per node is the roll's wall time minus the server's own start-to-ready
time (`startup_seconds`, which the start module reports), divided by the hosts.

Writes the section `rolling-overhead` of docs/benchmarks.md. Run from the repository root with
the tool venv on PATH: `make bench-rolling` (or `python bench/rolling_overhead.py`).
"""

import argparse
import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchdoc  # noqa: E402
from fleet import Fleet  # noqa: E402
from rolling_serial import ARGS  # noqa: E402

# The async start's result: the finished one carries startup_seconds (roles/sglang_server/tasks/wait.yml).
START_TASK = "Ask whether the start finished"
PATHS = (("per role", True), ("every role", False))
# The collection's target for its own time per node (issue 25).
TARGET_SECONDS = 30


def startup_seconds(run):
    """The server's own start-to-ready seconds of every start the roll watched, summed."""
    total = 0.0
    for task in run.tasks():
        if task["task"]["name"].endswith(START_TASK):
            for result in task["hosts"].values():
                total += float(result.get("startup_seconds") or 0)
    return total


# It reads every role's input on every run: not a role that ran on the node.
CHECK_PLAY = "Check every role's input before any change"


def roles_run(run):
    """The collection's roles that ran a task (not skipped) on the nodes, by how many tasks; the
    check play's aside."""
    ran = collections.Counter()
    for task in (task for play in run.report.get("plays", []) if play["play"]["name"] != CHECK_PLAY
                 for task in play["tasks"]):
        role, sep, dummy = task["task"]["name"].partition(" : ")
        if sep and role.startswith("inferops.gpu."):
            ran[role[len("inferops.gpu."):]] += sum(1 for result in task["hosts"].values() if not result.get("skipped"))
    return dict((role, count) for role, count in ran.items() if count)


def roll(fleet, fast_path, bs):
    extra = {"rolling_serial": 1, "sglang_server_args": ARGS[bs], "inferops_fast_path": fast_path}
    run = fleet.play("rolling.yml", "-l", "blackwell", "-e", json.dumps(extra), timeout=3600, check=False)
    startup = startup_seconds(run)
    return dict(fast_path=fast_path, seconds=run.seconds, startup=startup, rc=run.rc, tasks=run.ran(),
                own=(run.seconds - startup) / len(fleet.hosts), roles=roles_run(run), changed=run.changed())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    fleet = Fleet("conv%d" % args.hosts, args.hosts).start()
    fleet.play("site.yml", "-l", "blackwell", timeout=3600)
    began = time.time()
    rolls = []
    for index in range(args.runs):
        for dummy, fast_path in PATHS:
            # Every roll changes the arguments from the ones the last roll left.
            rolls.append(roll(fleet, fast_path, 64 if len(rolls) % 2 == 0 else 128))
    section = report(rolls, args, time.time() - began)
    print(section)
    if not args.no_write:
        benchdoc.write_section("rolling-overhead", section)
    wrong = [r for r in rolls if r["rc"] != 0 or r["startup"] == 0]
    if wrong:
        sys.exit("a roll failed or restarted no server: %s" % wrong)


def report(rolls, args, seconds):
    rows, medians = [], {}
    for name, fast_path in PATHS:
        mine = [r for r in rolls if r["fast_path"] == fast_path]
        medians[name] = benchdoc.median([r["own"] for r in mine])
        roles = sorted(set(role for r in mine for role in r["roles"]))
        rows.append([name, benchdoc.fmt(medians[name]), ", ".join(benchdoc.fmt(r["own"]) for r in mine),
                     benchdoc.fmt(benchdoc.median([r["seconds"] for r in mine])),
                     benchdoc.fmt(benchdoc.median([r["startup"] for r in mine])),
                     benchdoc.fmt(benchdoc.median([r["tasks"] for r in mine]), 0), ", ".join(roles),
                     "%d/%d" % (sum(r["rc"] == 0 for r in mine), len(mine))])
    met = medians["per role"] <= TARGET_SECONDS
    return "\n".join([
        "## A roll's own cost per node: per role against every role (issue 25)",
        benchdoc.provenance(benchdoc.command("make bench-rolling"), "; %d serving systemd container hosts (Debian 12, the CI "
                            "stack and the stand-in server), `rolling.yml` serial 1, %d rolls of each path alternating, "
                            "%.0f s in all" % (args.hosts, args.runs, seconds)),
        "",
        "Each roll changes only the server's arguments (`--cuda-graph-max-bs` 64, then 128). Own time per node: the roll's "
        "wall time minus the servers' own start-to-ready seconds (`startup_seconds` of the start module), divided by the "
        "hosts. Per role is the default (the fast path sends the node through the health gate and the server role); every "
        "role is `inferops_fast_path=false`, the path before.",
        "",
        benchdoc.table(["path", "own s/node (median)", "rolls (own s/node)", "roll wall s", "server start s", "tasks run",
                        "roles that ran", "passed"], rows),
        "",
        "Every role / per role, own time: **%s**. Target <= %d s per node: **%s** (%s s)." % (
            benchdoc.ratio(medians["every role"], medians["per role"]), TARGET_SECONDS, "met" if met else "not met",
            benchdoc.fmt(medians["per role"])),
    ])


if __name__ == "__main__":
    main()
