"""Cold site.yml against its no-op re-run, on 1 and on 4 container hosts (issue 13, figure 4).

For each fleet size: COLD runs of `site.yml` on new containers (CUDA 13.0 from NVIDIA's wheels,
the CI stack's ml-env release, the runtime env, the server behind its gates); after the last one,
RUNS no-op runs of `site.yml` interleaved with RUNS runs of Ansible's floor for the same hosts
(bench/floor.yml: facts plus ten `ansible.builtin.stat` tasks). Time, tasks run, `changed` (must
be 0 for a no-op). Then one no-op through every role (`-e inferops_fast_path=false`) and one
fast-path no-op under the ansible.posix.profile_tasks and profile_roles callbacks: where the time
goes. The 4-host fleet is left running for bench/rolling_serial.py (figure 5).

Writes the section `converge` of docs/benchmarks.md and a chart. Run from the repository root
with the tool venv on PATH: `make bench-converge` (or `python bench/converge.py`).
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchdoc  # noqa: E402
from fleet import Fleet, PlaybookFailed, ROOT, stamp  # noqa: E402

# A line of profile_tasks / profile_roles: `name ---------- 1.23s`.
PROFILE_LINE = re.compile(r"^(\S.*?) -{2,} (\d+\.\d+)s\s*$")


def fleet_of(size):
    return Fleet("conv%d" % size, size)


def per_role(run):
    """{role: [tasks run, seconds]} from the json callback's task timings."""
    roles = collections.defaultdict(lambda: [0, 0.0])
    for task in run.tasks():
        name = task["task"]["name"]
        role = name.split(" : ")[0] if " : " in name else "(playbook)"
        ran = sum(1 for result in task["hosts"].values() if not result.get("skipped"))
        roles[role][0] += ran
        duration = task["task"].get("duration") or {}
        if ran and duration.get("start") and duration.get("end"):
            roles[role][1] += stamp(duration["end"]) - stamp(duration["start"])
    return dict(roles)


def profiled(fleet, *extra):
    """One site.yml under profile_tasks and profile_roles: ({role: s}, [(task, s)] slowest first)."""
    env = dict(os.environ, ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks,ansible.posix.profile_roles",
               PROFILE_TASKS_TASK_OUTPUT_LIMIT="all", PROFILE_TASKS_SORT_ORDER="descending",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(["ansible-playbook", "-i", fleet.inventory, "site.yml"] + list(extra), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode != 0:
        raise PlaybookFailed("profiled site.yml failed:\n%s" % proc.stdout[-3000:])
    return parse_profile(proc.stdout)


def parse_profile(output):
    """({role: s}, [(task, s)]) from the summaries profile_roles and profile_tasks print after the recap."""
    roles, tasks = {}, []
    for line in output[output.rindex("PLAY RECAP"):].splitlines():
        match = PROFILE_LINE.match(line.strip())
        if not match:
            continue
        name, seconds = match.group(1).strip(), float(match.group(2))
        if name.lower().startswith("total"):
            continue
        # A role's name has no space; a task's is "role : name" or a playbook task's words.
        if " " in name:
            tasks.append((name, seconds))
        else:
            roles[name] = seconds
    return roles, tasks


def measure(size, cold_runs, runs):
    fleet = fleet_of(size)
    colds = []
    for dummy in range(max(cold_runs, 1)):
        fleet.start(fresh=True)
        colds.append(fleet.play("site.yml", "-l", "blackwell", timeout=3600))
    noop, floor = [], []
    for dummy in range(runs):
        floor.append(fleet.play("bench/floor.yml"))
        noop.append(fleet.play("site.yml", "-l", "blackwell"))
    full = fleet.play("site.yml", "-l", "blackwell", "-e", "inferops_fast_path=false")
    profile_noop = profiled(fleet, "-l", "blackwell")
    return dict(size=size, cold=colds if cold_runs else [], noop=noop, floor=floor, full=full,
                profile_noop=profile_noop, fleet=fleet)


def report(results, args, seconds):
    lines = ["## Converge: cold against the no-op re-run, on 1 and 4 hosts (issue 13, figure 4)",
             benchdoc.provenance(benchdoc.command("make bench-converge"), "; systemd container hosts (Debian 12) reached with "
                                 "`docker exec`, %d cold runs on new containers and %d no-op runs interleaved with "
                                 "%d floor runs per fleet size, %.0f s in all" % (args.cold_runs, args.runs, args.runs,
                                                                                  seconds)),
             ""]
    rows, series = [], []
    for result in results:
        size = result["size"]
        cold = [run.seconds for run in result["cold"]]
        noop = [run.seconds for run in result["noop"]]
        floor = [run.seconds for run in result["floor"]]

        def per_host(run, size=size):
            return run.ran() // size

        if cold:
            rows.append(["%d" % size, "cold `site.yml`", benchdoc.fmt(benchdoc.median(cold)),
                         ", ".join(benchdoc.fmt(v) for v in cold), per_host(result["cold"][-1]),
                         ", ".join(str(run.changed()) for run in result["cold"]), "-"])
        rows.append(["%d" % size, "no-op `site.yml`", benchdoc.fmt(benchdoc.median(noop)),
                     ", ".join(benchdoc.fmt(v) for v in noop), per_host(result["noop"][-1]),
                     ", ".join(str(run.changed()) for run in result["noop"]),
                     benchdoc.ratio(benchdoc.median(noop), benchdoc.median(floor), 2)])
        rows.append(["%d" % size, "floor (`bench/floor.yml`)", benchdoc.fmt(benchdoc.median(floor)),
                     ", ".join(benchdoc.fmt(v) for v in floor), per_host(result["floor"][-1]),
                     ", ".join(str(run.changed()) for run in result["floor"]), "1.00x"])
        rows.append(["%d" % size, "no-op through the roles (`-e inferops_fast_path=false`, one run)",
                     benchdoc.fmt(result["full"].seconds), benchdoc.fmt(result["full"].seconds),
                     per_host(result["full"]), str(result["full"].changed()),
                     benchdoc.ratio(result["full"].seconds, benchdoc.median(floor), 2)])
        if cold:
            series.append(("cold, %d host%s" % (size, "s" * (size > 1)), cold))
        series += [("no-op, %d" % size, noop), ("floor, %d" % size, floor)]
    lines += [benchdoc.table(["hosts", "run", "median s", "runs (s)", "tasks run per host", "changed",
                              "/ floor"], rows), ""]
    for result in results:
        if result["cold"]:
            lines.append("Cold / no-op on %d host(s): **%s**." % (result["size"], benchdoc.ratio(
                benchdoc.median([run.seconds for run in result["cold"]]),
                benchdoc.median([run.seconds for run in result["noop"]]), 0)))
    one = [result for result in results if result["size"] == 1]
    if one:
        ratio = benchdoc.median([r.seconds for r in one[0]["noop"]]) / benchdoc.median([r.seconds for r in one[0]["floor"]])
        lines.append("No-op on one host against the floor for one host: **%.2f** (target: at most 2)." % ratio)
    lines += ["", benchdoc.chart("converge", "site.yml: cold, no-op and the floor (s, log scale)", "seconds",
                                 series, log=True), ""]
    for result in results:
        lines += ["Where the time goes on %d host(s) (the json callback's task timings, tasks run over all hosts):"
                  % result["size"], ""]
        rows = []
        cold_roles = per_role(result["cold"][-1]) if result["cold"] else {}
        full_roles, noop_roles = per_role(result["full"]), per_role(result["noop"][-1])
        for role in sorted(set(cold_roles) | set(full_roles) | set(noop_roles),
                           key=lambda name: -(cold_roles.get(name, full_roles.get(name, [0, 0]))[1])):
            cells = [role]
            for roles in (cold_roles, full_roles, noop_roles):
                count, secs = roles.get(role, [0, 0.0])
                cells.append("%d / %.1f" % (count, secs) if count else "-")
            if any(cell != "-" for cell in cells[1:]):
                rows.append(cells)
        lines += [benchdoc.table(["role", "cold: tasks / s", "through the roles: tasks / s",
                                  "no-op (fast path): tasks / s"], rows), ""]
        roles, tasks = result["profile_noop"]
        lines.append("The fast-path no-op under `ansible.posix.profile_tasks` and `profile_roles`: %s; tasks: %s."
                     % (", ".join("%s %.2f s" % kv for kv in sorted(roles.items(), key=lambda kv: -kv[1])) or "-",
                        ", ".join("%s %.2f s" % kv for kv in tasks[:6]) or "-"))
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4", help="fleet sizes, comma-separated")
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    began = time.time()
    results = [measure(int(size), args.cold_runs, args.runs) for size in args.sizes.split(",")]
    section = report(results, args, time.time() - began)
    print(section)
    for result in results:
        if result["fleet"].hosts and len(result["fleet"].hosts) != 4:
            result["fleet"].destroy()
    changed = [run.changed() for result in results for run in result["noop"]] + [r["full"].changed() for r in results]
    if any(changed):
        sys.exit("a no-op run changed something: %s" % changed)
    if not args.no_write:
        benchdoc.write_section("converge", section)


if __name__ == "__main__":
    main()
