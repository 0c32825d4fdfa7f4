"""A no-op site.yml against Ansible's floor on the demo hosts, side by side (issue 12 item 7).

Starts the demo hosts (tools/demo.sh: two systemd containers, site.yml converged cold once), then
interleaves RUNS no-op runs of `site.yml -l <hosts>` with RUNS runs of bench/floor.yml (facts plus
ten stat tasks) over the same hosts (a no-op run takes site.yml's fast path), then one run of the
same no-op through every role (`-e inferops_fast_path=false`), and reports the medians, their
ratio, the task counts, the changed counts (must be 0) and where the run through the roles spends
its time per role. bench/converge.py (figure 4) measures the same on new fleets of 1 and 4 hosts;
this one is the quick check on hosts already up. Writes the section `noop` of docs/benchmarks.md.
Run from the repository root with the tool venv on PATH (`make bench-noop`, or
`python bench/noop_converge.py`).
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchdoc  # noqa: E402
import converge  # noqa: E402
import fleet  # noqa: E402

INVENTORY = os.path.join(fleet.ROOT, "inventories", "local", "hosts.yml")


def play(playbook, limit, *extra):
    return fleet.play(["ansible-playbook", "-i", INVENTORY, "-l", limit, playbook] + list(extra), timeout=1800)


def report(noop, floor, full, args):
    hosts = len(noop[-1].report["stats"])
    noop_s = benchdoc.median([run.seconds for run in noop])
    floor_s = benchdoc.median([run.seconds for run in floor])
    fast_roles = converge.per_role(noop[-1])
    lines = [
        "## No-op converge against Ansible's floor (issue 12, item 7)",
        benchdoc.provenance(benchdoc.command("make bench-noop"), "; the demo hosts (systemd containers reached with "
                            "`docker exec`) converged once, then %d runs each of a no-op `site.yml` and of "
                            "`bench/floor.yml` (facts plus ten `ansible.builtin.stat` tasks) over %d host(s) (`-l %s`), "
                            "interleaved" % (args.runs, hosts, args.limit)),
        "",
        benchdoc.table(["run", "median s", "runs (s)", "tasks run per host", "skipped", "changed"], [
            ["floor", benchdoc.fmt(floor_s), ", ".join(benchdoc.fmt(run.seconds) for run in floor),
             floor[-1].ran() // hosts, floor[-1].skipped() // hosts, ", ".join(str(run.changed()) for run in floor)],
            ["no-op `site.yml`", benchdoc.fmt(noop_s), ", ".join(benchdoc.fmt(run.seconds) for run in noop),
             noop[-1].ran() // hosts, noop[-1].skipped() // hosts, ", ".join(str(run.changed()) for run in noop)],
            ["the same no-op through the roles (`-e inferops_fast_path=false`, one run)", benchdoc.fmt(full.seconds),
             benchdoc.fmt(full.seconds), full.ran() // hosts, full.skipped() // hosts, full.changed()],
        ]),
        "",
        "Ratio no-op / floor: **%.2f** (target: at most 2)." % (noop_s / floor_s),
        "",
        "Where the time of the run through the roles goes (task seconds summed over the play, tasks run over all "
        "hosts); the no-op run is the fast path's %d tasks (%.1f s):" % (
            noop[-1].ran(), sum(seconds for count, seconds in fast_roles.values())),
        "",
        benchdoc.table(["role", "tasks run", "seconds"], [
            [role, count, benchdoc.fmt(seconds)]
            for role, (count, seconds) in sorted(converge.per_role(full).items(), key=lambda kv: -kv[1][1])]),
    ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--limit", default="inferops-demo-1", help="hosts of the no-op run and the floor")
    parser.add_argument("--no-demo", action="store_true", help="the demo hosts are up and converged")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    if not args.no_demo:
        subprocess.run([os.path.join(fleet.ROOT, "tools", "demo.sh")], cwd=fleet.ROOT, check=True,
                       stdout=subprocess.DEVNULL, timeout=1800)
    noop, floor = [], []
    for dummy in range(args.runs):
        floor.append(play("bench/floor.yml", args.limit))
        noop.append(play("site.yml", args.limit))
    # The same no-op through every role (the fast path off): what a run costs when a node must be looked at.
    full = play("site.yml", args.limit, "-e", "inferops_fast_path=false")
    section = report(noop, floor, full, args)
    print(section)
    changed = [run.changed() for run in noop] + [full.changed()]
    if any(changed):
        sys.exit("a no-op run changed something: %s" % changed)
    if not args.no_write:
        benchdoc.write_section("noop", section)


if __name__ == "__main__":
    main()
