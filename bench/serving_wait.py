"""Crash to failure and readiness overhead: our health gate against the usual ways of waiting
(issue 13, figures 1 and 2).

The same plain systemd unit over the SGLang stand-in (bench/playbooks/standin_server.yml) on
light container hosts, started and waited for three ways (bench/playbooks/serving_wait.yml):
`ours` (inferops.gpu.sglang_server), `wait_for` on the port (timeout 300) and a `uri` loop on
/health (retries 60, delay 10).

1. Crash to failure: the stand-in's rank crashes about 3 s after the start (fault rank_crash:
   the weights fail to load, the server dies, systemd restarts it 10 s later to crash again).
   Seconds from the crash (its log line, ms) to the failed task's end, and whether the failure
   names the cause. The slow ways run once each on RUNS hosts at the same time (they mostly
   sleep), while `ours` runs RUNS times on a host of its own. Also the crash after the port
   opened (fault warmup_failed): what each way reports.
2. Readiness overhead: a clean start; the task's end minus the stand-in's ready line, `ours`
   and `uri` interleaved on one host.

Writes the section `serving` of docs/benchmarks.md and two charts. Run from the repository
root with the tool venv on PATH: `make bench-serving` (or `python bench/serving_wait.py`).
"""

import argparse
import datetime
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchdoc  # noqa: E402
from fleet import Fleet  # noqa: E402

WAIT = "bench/playbooks/serving_wait.yml"
LAST_TASK = {"ours": "Start and wait (inferops.gpu.sglang_server)", "wait_for": "Wait for the port (wait_for)",
             "uri": "Wait for /health (uri)"}
LABEL = {"ours": "inferops.gpu.sglang_server", "wait_for": "wait_for port (timeout 300)",
         "uri": "uri /health loop (retries 60, delay 10)"}
# The first line of each fault's crash in the stand-in's log, and the text that names its cause.
CRASH_LINE = {"rank_crash": "Scheduler hit an exception", "warmup_failed": "[http_server] Error"}
# Named: the failure quotes the server's own crash line, or the warmup's failure.
CAUSE = {"rank_crash": "Scheduler hit an exception", "warmup_failed": "warmup"}
# How the usual ways fail when the server never comes up.
EXPECTED = {"wait_for": "Timeout when waiting for 127.0.0.1:30000", "uri": "Status code was -1"}
# --quick: short limits for the slow ways, to try the bench out (its figures are not the usual ones).
QUICK = []
READY_LINE = "The server is fired up and ready to roll!"
LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})[^\]]*\] (.*)$")


def log_instants(text):
    """{first line text: its POSIX time} for the lines the bench looks for, from a ms-stamped log."""
    found = {}
    for line in text.replace("\r", "\n").splitlines():
        match = LOG_LINE.match(line)
        if not match:
            continue
        message = match.group(2)
        for wanted in list(CRASH_LINE.values()) + [READY_LINE]:
            if wanted in message and wanted not in found:
                found[wanted] = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(
                    tzinfo=datetime.timezone.utc).timestamp()
    return found


class Sample:
    def __init__(self, wait, fault, host, run, instants, settle=0):
        self.wait, self.fault, self.host = wait, fault, host
        result = run.result(LAST_TASK[wait], host) or {}
        self.failed = bool(result.get("failed"))
        self.message = str(result.get("msg", ""))
        self.end = run.task_end(LAST_TASK[wait])
        self.crash = instants.get(CRASH_LINE.get(fault, "\0"))
        self.ready = instants.get(READY_LINE)
        self.cause_named = fault in CAUSE and CAUSE[fault] in self.message

    def after(self, instant):
        return None if instant is None or self.end is None else self.end - instant


def one_run(fleet, wait, fault, hosts, settle=0.0):
    """One playbook run on `hosts`; a Sample per host (log read `settle` s after the task ended)."""
    run = fleet.play(WAIT, "-e", "bench_wait=%s bench_fault=%s" % (wait, fault), "-f", str(len(hosts)), *QUICK,
                     limit=",".join(hosts), check=False, timeout=1200)
    if settle:
        time.sleep(settle)
    samples = []
    for host in hosts:
        log = fleet.exec(host, "cat", "/var/log/sglang/server.log").stdout
        fleet.exec(host, "systemctl", "stop", "sglang-server.service")
        samples.append(Sample(wait, fault, host, run, log_instants(log)))
    return samples


def in_background(target, *args):
    out = []
    thread = threading.Thread(target=lambda: out.extend(target(*args)), daemon=True)
    thread.start()
    return thread, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--keep", action="store_true", help="leave the hosts running")
    parser.add_argument("--quick", action="store_true", help="wait_for timeout 20, uri 3 x 5 s: a try-out, not figures")
    args = parser.parse_args()
    if args.quick:
        QUICK.extend(["-e", "bench_wait_for_timeout=20 bench_uri_retries=3 bench_uri_delay=5"])
        args.no_write = True

    fleet = Fleet("serve", 2 * args.runs + 1).start()
    fleet.play("bench/playbooks/standin_server.yml", "-f", "10")
    slow_wait_for, slow_uri, own = fleet.hosts[:args.runs], fleet.hosts[args.runs:2 * args.runs], fleet.hosts[-1]
    began = time.time()
    # The slow ways wait out their limits; they run beside the rest, on their own hosts.
    threads = [in_background(one_run, fleet, "wait_for", "rank_crash", slow_wait_for),
               in_background(one_run, fleet, "uri", "rank_crash", slow_uri)]
    crash_ours, late_ours, late_wait_for, ready = [], [], [], {"ours": [], "uri": []}
    # Beside the slow ways, once their starts are over: the crashes, whose figures are far from them.
    time.sleep(0 if args.quick else 20)
    for dummy in range(args.runs):
        crash_ours += one_run(fleet, "ours", "rank_crash", [own])
        # A crash after the port opened: wait_for has returned by then; the log tells what followed.
        late_wait_for += one_run(fleet, "wait_for", "warmup_failed", [own], settle=8)
        late_ours += one_run(fleet, "ours", "warmup_failed", [own])
    for thread, dummy in threads:
        thread.join()
    # Readiness to a fraction of a second wants a quiet machine: after the slow ways ended.
    for dummy in range(args.runs):
        for wait in ("ours", "uri"):
            ready[wait] += one_run(fleet, wait, "none", [own])
    crash = {"ours": crash_ours, "wait_for": threads[0][1], "uri": threads[1][1]}
    section = report(args, crash, late_ours, late_wait_for, ready, time.time() - began)
    print(section)
    if not args.no_write:
        benchdoc.write_section("serving", section)
    if not args.keep:
        fleet.destroy()
    # The usual ways must have failed the way they do, or their figures are of something else.
    bad = [s for wait in ("wait_for", "uri") for s in crash[wait] if EXPECTED[wait] not in s.message]
    bad += [s for s in late_wait_for if s.failed]
    bad += [s for s in crash_ours + late_ours if not s.failed or not s.cause_named]
    bad += [s for s in ready["ours"] if s.failed]
    if bad:
        sys.exit("a way of waiting did not behave as it should: %s" % [(s.wait, s.fault, s.failed, s.message[:300]) for s in bad])


def report(args, crash, late_ours, late_wait_for, ready, seconds):
    rows = []
    series = []
    for wait in ("ours", "wait_for", "uri"):
        values = [s.after(s.crash) for s in crash[wait]]
        failed = sum(s.failed for s in crash[wait])
        named = sum(s.cause_named for s in crash[wait])
        rows.append([LABEL[wait], benchdoc.fmt(benchdoc.median(values), 2), ", ".join(benchdoc.fmt(v, 1) for v in values),
                     "%d/%d" % (failed, len(values)), "%d/%d" % (named, len(values)),
                     benchdoc.ratio(benchdoc.median(values), benchdoc.median([s.after(s.crash) for s in crash["ours"]]), 0)])
        series.append((LABEL[wait].split(" (", maxsplit=1)[0], [v for v in values if v is not None]))
    example = {wait: (crash[wait][0].message.splitlines() or [""])[0][:160] for wait in crash if crash[wait]}
    late_rows = []
    for name, samples in (("inferops.gpu.sglang_server", late_ours), ("wait_for port (timeout 300)", late_wait_for)):
        verdict = "failed" if all(s.failed for s in samples) else ("ok" if not any(s.failed for s in samples) else "mixed")
        after = [s.after(s.crash) for s in samples]
        late_rows.append([name, verdict, "%d/%d" % (sum(s.cause_named for s in samples), len(samples)),
                          ", ".join(benchdoc.fmt(v, 2) for v in after)])
    ready_rows, ready_series = [], []
    for wait in ("ours", "uri"):
        values = [s.after(s.ready) for s in ready[wait]]
        ready_rows.append([LABEL[wait], benchdoc.fmt(benchdoc.median(values), 2),
                           ", ".join(benchdoc.fmt(v, 2) for v in values),
                           "%d/%d" % (sum(not s.failed for s in ready[wait]), len(values))])
        ready_series.append((LABEL[wait].split(" (", maxsplit=1)[0], [v for v in values if v is not None]))
    ready_ratio = benchdoc.ratio(benchdoc.median([s.after(s.ready) for s in ready["uri"]]),
                                 benchdoc.median([s.after(s.ready) for s in ready["ours"]]), 0)
    lines = [
        "## Crash to failure and readiness overhead (issue 13, figures 1 and 2)",
        benchdoc.provenance(benchdoc.command("make bench-serving"), "; %d light systemd container hosts (Debian 12) each running the "
                            "SGLang stand-in under one plain unit (`bench/playbooks/standin_server.yml`: "
                            "Restart=on-failure, RestartSec=10), %d runs of each way, %.0f s in all"
                            % (2 * args.runs + 1, args.runs, seconds)),
        "",
        "**Crash to failure.** The stand-in's first rank fails to load its weights about 3 s after the start "
        "(fault `rank_crash`); seconds from the crash's first log line to the end of the failed task:",
        "",
        benchdoc.table(["way of waiting", "median s", "runs (s)", "task failed", "cause in the message",
                        "/ ours"], rows),
        "",
        benchdoc.chart("serving-crash", "Crash to failed task (s, log scale)", "seconds", series, log=True),
        "",
        "First line of each failure message: %s." % "; ".join(
            "%s: `%s`" % (LABEL[w], example[w].replace("`", "'")) for w in example),
        "",
        "**A crash after the port opened** (fault `warmup_failed`: the warmup request fails and the server "
        "kills itself, about 1 s after the port opens). What each way reported, and its task's end relative to the "
        "crash (negative: it had returned before the server died):",
        "",
        benchdoc.table(["way of waiting", "task", "cause in the message", "task end - crash (s)"], late_rows),
        "",
        "**Readiness overhead.** A clean start; the task's end minus the stand-in's ready line "
        "(`%s`, ms stamps), interleaved on one host:" % READY_LINE,
        "",
        benchdoc.table(["way of waiting", "median s", "runs (s)", "task ok"], ready_rows),
        "",
        "Ratio uri loop / ours: **%s** (target for ours: median at most 0.5 s)." % ready_ratio,
        "",
        benchdoc.chart("serving-ready", "Task end minus ready line (s)", "seconds", ready_series),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
