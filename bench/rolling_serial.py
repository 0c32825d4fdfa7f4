"""Rolling a change over 4 serving hosts, `serial` 1 against 2 (issue 13, figure 5).

The 4-host fleet of bench/converge.py (started and converged here when it is not), a sampler on
every host recording its own /health_generate every 0.5 s (bench/playbooks/health_sampler.yml),
then rolls of `rolling.yml` that change the server's arguments (`--cuda-graph-max-bs` 64, then
back to the inventory's 128), so every node restarts behind its gates; serial 1 and serial 2
alternate, RUNS of each. Per roll: wall time, `changed`, and the largest number of hosts out of
service at one instant in the samples.

Writes the section `rolling` of docs/benchmarks.md and a chart. Run from the repository root
with the tool venv on PATH: `make bench-rolling` (or `python bench/rolling_serial.py`).
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchdoc  # noqa: E402
from fleet import Fleet  # noqa: E402

SAMPLES = "/var/log/health-samples.log"
# The inventory's arguments (inventories/local/group_vars/blackwell.yml) and the changed ones.
ARGS = {128: ["--tp", "1", "--cuda-graph-max-bs", "128", "--disable-custom-all-reduce"],
        64: ["--tp", "1", "--cuda-graph-max-bs", "64", "--disable-custom-all-reduce"]}


def samples(text, since, until):
    """[(time, up)] of a sampler's lines (`epoch-seconds status`) inside [since, until]."""
    found = []
    for line in text.splitlines():
        stamp, dummy, code = line.partition(" ")
        try:
            when = float(stamp)
        except ValueError:
            continue
        if since <= when <= until:
            found.append((when, code == "200"))
    return found


def most_down_at_once(per_host):
    """The largest number of hosts whose last sample was not 200, at any sample instant.

    per_host: {host: [(time, up)]}; returns (that number, samples read).
    """
    events = sorted((when, host, up) for host, found in per_host.items() for when, up in found)
    down, worst = set(), 0
    for dummy, host, up in events:
        (down.discard if up else down.add)(host)
        worst = max(worst, len(down))
    return worst, len(events)


def roll(fleet, serial, steps, bs):
    extra = {"rolling_serial": serial, "sglang_server_args": ARGS[bs]}
    if steps:
        extra["rolling_steps"] = steps
    began = time.time()
    run = fleet.play("rolling.yml", "-l", "blackwell", "-e", json.dumps(extra), timeout=3600, check=False)
    ended = time.time()
    worst, count = most_down_at_once({host: samples(fleet.exec(host, "cat", SAMPLES).stdout, began, ended)
                                      for host in fleet.hosts})
    failures = ["%s: %s" % (host, str(result.get("msg", ""))[:300]) for task in run.tasks()
                for host, result in task["hosts"].items() if result.get("failed") and not result.get("ignore_errors")]
    return dict(serial=serial, seconds=run.seconds, changed=run.changed(), down=worst, samples=count, bs=bs,
                rc=run.rc, failures=failures)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--steps", default="sglang_server",
                        help="rolling_steps, comma-separated ('' for the role's default: every role)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    steps = [step for step in args.steps.split(",") if step]

    fleet = Fleet("conv%d" % args.hosts, args.hosts).start()
    fleet.play("site.yml", "-l", "blackwell", timeout=3600)
    fleet.play("bench/playbooks/health_sampler.yml")
    began = time.time()
    rolls = []
    for dummy in range(args.runs):
        for serial in (1, 2):
            rolls.append(roll(fleet, serial, steps, 64 if serial == 1 else 128))
    section = report(rolls, args, steps, time.time() - began)
    print(section)
    if not args.no_write:
        benchdoc.write_section("rolling", section)
    # A roll that failed (a gate, a rollback) is not a figure of a roll: it stops the bench.
    wrong = [r for r in rolls if r["down"] > r["serial"] or r["changed"] == 0 or r["rc"] != 0]
    if wrong:
        sys.exit("a roll took more hosts out than its batch, or changed nothing: %s" % wrong)


def report(rolls, args, steps, seconds):
    rows, series = [], []
    medians = {}
    for serial in (1, 2):
        mine = [r for r in rolls if r["serial"] == serial]
        times = [r["seconds"] for r in mine]
        medians[serial] = benchdoc.median(times)
        rows.append(["%d" % serial, benchdoc.fmt(medians[serial]), ", ".join(benchdoc.fmt(t) for t in times),
                     "%d/%d" % (sum(r["rc"] == 0 for r in mine), len(mine)),
                     max(r["down"] for r in mine), ", ".join(str(r["down"]) for r in mine),
                     ", ".join(str(r["changed"]) for r in mine), sum(r["samples"] for r in mine)])
        series.append(("serial %d" % serial, times))
    lines = [
        "## Rolling: serial 1 against serial 2 on 4 hosts (issue 13, figure 5)",
        benchdoc.provenance(benchdoc.command("make bench-rolling"), "; %d serving systemd container hosts (Debian 12, the CI stack and "
                            "the stand-in server), `rolling.yml` with `rolling_steps` %s, %d rolls of each serial "
                            "alternating, %.0f s in all" % (args.hosts, steps or "(every role)", args.runs, seconds)),
        "",
        "Each roll changes the server's arguments (`--cuda-graph-max-bs` 64, then back to 128), so every node is "
        "snapshotted, restarted behind its health gate, measured by its throughput gate and recorded. Out of service: "
        "a host whose own `/health_generate` sampler (every 0.5 s) last saw anything but 200.",
        "",
        benchdoc.table(["serial", "median s", "rolls (s)", "rolls that passed", "most hosts out at once", "per roll", "changed",
                        "samples"], rows),
        "",
        "Serial 1 / serial 2 wall time: **%s**." % benchdoc.ratio(medians[1], medians[2], 2),
    ]
    failed = [r for r in rolls if r["rc"] != 0]
    if failed:
        lines += ["", "Rolls that failed: %s" % "; ".join(
            "serial %d: %s" % (r["serial"], " | ".join(r["failures"][:3])) for r in failed)]
    lines += ["", benchdoc.chart("rolling", "rolling.yml over 4 hosts (s)", "seconds", series)]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
