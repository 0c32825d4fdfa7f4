"""A no-op site.yml against Ansible's floor, side by side (issue 12 item 7, issue 13 figure 4).

Starts the demo hosts (tools/demo.sh: two systemd containers, site.yml converged cold once), then
interleaves RUNS no-op runs of `site.yml -l <hosts>` with RUNS runs of bench/floor.yml (facts plus
ten stat tasks) over the same hosts (a no-op run takes site.yml's fast path), then one run of the
same no-op through every role (`-e inferops_fast_path=false`), and reports the medians, their
ratio, the task counts, the changed counts (must be 0) and where the run through the roles spends
its time per role. Writes the section between the
noop markers of docs/benchmarks.md. Run from the repository root with the tool venv on PATH
(`make bench-noop`, or `python bench/noop_converge.py`).
"""

import argparse
import collections
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
START, END = "<!-- noop:start -->", "<!-- noop:end -->"


def play(playbook, limit, *extra):
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    begin = time.monotonic()
    proc = subprocess.run(["ansible-playbook", "-i", "inventories/local/hosts.yml", "-l", limit, playbook] + list(extra),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)
    seconds = time.monotonic() - begin
    if proc.returncode != 0:
        sys.exit("%s failed (rc %d):\n%s\n%s" % (playbook, proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))
    return seconds, json.loads(proc.stdout)


def summarise(report):
    """Tasks that ran (not skipped) per host, changed, and seconds per role from the task timings."""
    ran, skipped, per_role = 0, 0, collections.defaultdict(lambda: [0, 0.0])
    for one in report["plays"]:
        for task in one["tasks"]:
            name = task["task"]["name"]
            role = name.split(" : ")[0] if " : " in name else "(playbook)"
            duration = task["task"].get("duration", {})
            for result in task["hosts"].values():
                if result.get("skipped"):
                    skipped += 1
                    continue
                ran += 1
                per_role[role][0] += 1
            if duration.get("start") and duration.get("end"):
                per_role[role][1] += _seconds(duration["end"]) - _seconds(duration["start"])
    changed = sum(stats.get("changed", 0) for stats in report["stats"].values())
    return ran, skipped, changed, dict(per_role)


def _seconds(stamp):
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--limit", default="inferops-demo-1", help="hosts of the no-op run and the floor")
    parser.add_argument("--no-demo", action="store_true", help="the demo hosts are up and converged")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    if not args.no_demo:
        subprocess.run([os.path.join(ROOT, "tools", "demo.sh")], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    noop, floor = [], []
    for dummy in range(args.runs):
        floor.append(play("bench/floor.yml", args.limit))
        noop.append(play("site.yml", args.limit))
    # The same no-op through every role (the fast path off): what a run costs when a node must be looked at.
    full = play("site.yml", args.limit, "-e", "inferops_fast_path=false")
    hosts = len(noop[0][1]["stats"])
    noop_s = statistics.median(seconds for seconds, report in noop)
    floor_s = statistics.median(seconds for seconds, report in floor)
    ran, skipped, changed, per_role = summarise(noop[-1][1])
    full_ran, full_skipped, full_changed, full_per_role = summarise(full[1])
    floor_ran = summarise(floor[-1][1])[0]
    changed_all = [summarise(report)[2] for seconds, report in noop]
    lines = [
        START,
        "## No-op converge against Ansible's floor (%s)" % time.strftime("%Y-%m-%d"),
        "Command: `make bench-noop` (`bench/noop_converge.py --runs %d --limit %s`): the demo hosts converged "
        "once, then %d runs each of a no-op `site.yml` and of `bench/floor.yml` (facts plus ten "
        "`ansible.builtin.stat` tasks) over the same %d host(s), interleaved. Machine: %s, %d CPUs, Python %s, "
        "ansible-core %s; hosts are systemd containers reached with `docker exec`."
        % (args.runs, args.limit, args.runs, hosts, platform.platform(terse=True), os.cpu_count(),
           platform.python_version(), _ansible_version()),
        "",
        "| run | median s | runs (s) | tasks run per host | skipped | changed |",
        "| --- | --- | --- | --- | --- | --- |",
        "| floor | %.1f | %s | %d | 0 | 0 |" % (floor_s, ", ".join("%.1f" % seconds for seconds, report in floor), floor_ran // hosts),
        "| no-op `site.yml` | %.1f | %s | %d | %d | %s |" % (
            noop_s, ", ".join("%.1f" % seconds for seconds, report in noop), ran // hosts, skipped // hosts,
            ", ".join(str(c) for c in changed_all)),
        "| the same no-op through the roles (`-e inferops_fast_path=false`, one run) | %.1f | %.1f | %d | %d | %d |" % (
            full[0], full[0], full_ran // hosts, full_skipped // hosts, full_changed),
        "",
        "Ratio no-op / floor: **%.2f** (target: at most 2)." % (noop_s / floor_s),
        "",
        "Where the time of the run through the roles goes (task seconds summed over the play, tasks run over all "
        "hosts); the no-op run is the fast path's %d tasks (%.1f s):" % (ran, sum(s for c, s in per_role.values())),
        "",
        "| role | tasks run | seconds |",
        "| --- | --- | --- |",
    ]
    for role, (count, seconds) in sorted(full_per_role.items(), key=lambda kv: -kv[1][1]):
        lines.append("| %s | %d | %.1f |" % (role, count, seconds))
    lines.append(END)
    section = "\n".join(lines)
    print(section)
    if any(changed_all) or full_changed:
        sys.exit("a no-op run changed something: %s, through the roles %d" % (changed_all, full_changed))
    if not args.no_write:
        text = open(DOC).read()
        if START in text:
            text = text[:text.index(START)] + section + text[text.index(END) + len(END):]
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
        with open(DOC, "w") as handle:
            handle.write(text)


def _ansible_version():
    out = subprocess.run(["ansible", "--version"], capture_output=True, text=True, check=False).stdout
    return out.split("[core ")[1].split("]")[0] if "[core " in out else "?"


if __name__ == "__main__":
    main()
