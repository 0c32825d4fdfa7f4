"""The benchmarks' readers of logs, samples and callback output (bench/), on recorded text."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import benchdoc  # noqa: E402
import converge  # noqa: E402
import fleet  # noqa: E402
import noop_converge  # noqa: E402
import rolling_overhead  # noqa: E402
import rolling_serial  # noqa: E402
import serving_wait  # noqa: E402

# The stand-in's log with SGLANG_LOG_MS=1: a rank's crash (its prefix in the brackets, a tqdm
# update after a carriage return), then the main process noticing.
CRASH_LOG = (
    "[2026-12-01 18:24:43.101] server_args=ServerArgs(model_path='/srv/models/standin', ...)\n"
    "[2026-12-01 18:24:45.500 TP0] Load weight begin. avail mem=90.00 GB\r"
    "[2026-12-01 18:24:46.980] Scheduler hit an exception: Traceback (most recent call last):\n"
    "KeyError: 'model.layers.17.self_attn.qkv_proj.weight'\n"
    "[2026-12-01 18:24:46.990] Received sigquit from a child process. It usually means the child failed.\n"
    "[2026-12-01 18:24:59.000] Scheduler hit an exception: Traceback (most recent call last):\n"
)


def test_the_first_crash_line_and_its_millisecond_stamp_are_read():
    found = serving_wait.log_instants(CRASH_LOG)
    crash = found[serving_wait.CRASH_LINE["rank_crash"]]
    assert abs(crash - 1796149486.980) < 1e-6  # the first crash, not systemd's restart's
    assert serving_wait.READY_LINE not in found


def test_the_ready_line_is_read():
    log = "[2026-12-01 18:26:18.606] The server is fired up and ready to roll!\n"
    assert abs(serving_wait.log_instants(log)[serving_wait.READY_LINE] - 1796149578.606) < 1e-6


def test_lines_without_milliseconds_are_not_taken():
    assert serving_wait.log_instants("[2026-12-01 18:26:18] The server is fired up and ready to roll!\n") == {}


def test_hosts_out_at_once_follow_each_hosts_last_sample():
    per_host = {
        "a": rolling_serial.samples("10.0 200\n11.0 000\n12.0 503\n13.0 200\n", 0, 100),
        "b": rolling_serial.samples("10.5 200\n12.5 000\n13.5 200\n", 0, 100),
        "c": rolling_serial.samples("10.2 200\n11.2 200\n12.2 200\n", 0, 100),
    }
    assert rolling_serial.most_down_at_once(per_host) == (2, 10)  # a and b between 12.5 and 13.0


def test_samples_outside_the_roll_and_torn_lines_are_left_out():
    assert rolling_serial.samples("5.0 000\nnot a line\n20.0 000\n", 10, 15) == []
    assert rolling_serial.samples("12.0 200\n", 10, 15) == [(12.0, True)]


PROFILE_OUTPUT = """\
PLAY RECAP *********************************************************************
inferops-bench-conv1-1     : ok=4    changed=0    unreachable=0    failed=0

Tuesday 01 December 2026  18:34:10 +0000 (0:00:00.210)       0:00:02.400 *****
===============================================================================
inferops.gpu.converged ------------------------------------------------- 1.66s
ansible.builtin.debug -------------------------------------------------- 0.41s
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
total ------------------------------------------------------------------ 2.07s
Tuesday 01 December 2026  18:34:10 +0000 (0:00:00.210)       0:00:02.400 *****
===============================================================================
Compare the node with the record of its last converge ------------------ 1.66s
inferops.gpu.rolling : Record the node ---------------------------------- 0.30s
"""


def test_profile_callbacks_split_into_roles_and_tasks():
    roles, tasks = converge.parse_profile(PROFILE_OUTPUT)
    assert roles == {"inferops.gpu.converged": 1.66, "ansible.builtin.debug": 0.41}
    assert tasks == [("Compare the node with the record of its last converge", 1.66),
                     ("inferops.gpu.rolling : Record the node", 0.30)]


def test_a_section_is_replaced_between_its_markers_and_the_rest_is_kept(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nintro\n")
    benchdoc.write_section("x", "first", doc=str(doc))
    benchdoc.write_section("y", "other", doc=str(doc))
    benchdoc.write_section("x", "second", doc=str(doc))
    text = doc.read_text()
    assert "first" not in text and text.count("second") == 1 and "other" in text and "intro" in text
    assert text.index("second") < text.index("other")


def test_ratios_and_medians_say_when_there_is_nothing():
    assert benchdoc.ratio(None, 2) == "-" and benchdoc.ratio(3, 0) == "-"
    assert benchdoc.ratio(300.0, 0.3, 0) == "1000x"
    assert benchdoc.median([None, 1.0, 3.0]) == 2.0 and benchdoc.median([]) is None


def _task(name, start, end, **hosts):
    return {"task": {"name": name, "duration": {"start": start, "end": end}}, "hosts": hosts}


# The ansible.posix.json callback's shape: plays, their tasks with UTC durations and per-host results.
REPORT = {
    "plays": [{"tasks": [
        _task("Compare the node with the record of its last converge", "2026-12-01T18:34:08.000000Z",
              "2026-12-01T18:34:09.500000Z", a={"changed": False}, b={"changed": False}),
        _task("inferops.gpu.ml_env : Check the pins", "2026-12-01T18:34:09.500000Z", "2026-12-01T18:34:10.000000Z",
              a={"changed": False}, b={"skipped": True}),
        _task("inferops.gpu.ml_env : Build a release", "2026-12-01T18:34:10.000000Z", "2026-12-01T18:34:10.100000Z",
              a={"skipped": True}, b={"skipped": True}),
    ]}],
    "stats": {"a": {"ok": 2, "changed": 0}, "b": {"ok": 1, "changed": 1}},
}


def test_tasks_are_counted_and_timed_per_role_and_a_wholly_skipped_task_costs_nothing():
    run = fleet.Run(3.0, REPORT, 0, 0.0)
    assert run.ran() == 3 and run.skipped() == 3 and run.changed() == 1
    roles = converge.per_role(run)
    assert roles["(playbook)"][0] == 2 and abs(roles["(playbook)"][1] - 1.5) < 1e-6
    assert roles["inferops.gpu.ml_env"][0] == 1 and abs(roles["inferops.gpu.ml_env"][1] - 0.5) < 1e-6


def test_the_noop_section_reads_medians_ratio_and_counts_from_the_runs():
    args = type("Args", (), {"runs": 2, "limit": "a:b"})()
    noop = [fleet.Run(2.0, REPORT, 0, 0.0), fleet.Run(4.0, REPORT, 0, 0.0)]
    floor = [fleet.Run(6.0, REPORT, 0, 0.0), fleet.Run(6.0, REPORT, 0, 0.0)]
    text = noop_converge.report(noop, floor, fleet.Run(9.0, REPORT, 0, 0.0), args)
    assert "| no-op `site.yml` | 3.0 | 2.0, 4.0 | 1 | 1 | 1, 1 |" in text
    assert "Ratio no-op / floor: **0.50**" in text
    assert "| inferops.gpu.ml_env | 1 | 0.5 |" in text


def test_a_rolls_own_time_takes_out_the_server_starts_and_counts_the_roles_that_ran():
    check = {"play": {"name": rolling_overhead.CHECK_PLAY},
             "tasks": [{"task": {"name": "inferops.gpu.ml_env : Check the pin set"}, "hosts": {"h1": {}}}]}
    roll = {"play": {"name": "Roll"}, "tasks": [
        {"task": {"name": "inferops.gpu.gpu_health : Check the GPUs"}, "hosts": {"h1": {}, "h2": {"skipped": True}}},
        {"task": {"name": "inferops.gpu.ml_env : Build the release"}, "hosts": {"h1": {"skipped": True}}},
        {"task": {"name": "inferops.gpu.sglang_server : " + rolling_overhead.START_TASK},
         "hosts": {"h1": {"startup_seconds": 12.5}, "h2": {"startup_seconds": 7.5}}},
        {"task": {"name": "Compare the node with the record"}, "hosts": {"h1": {}}},
    ]}
    report = {"plays": [check, roll]}
    run = fleet.Run(60.0, report, 0, 0)
    assert rolling_overhead.startup_seconds(run) == 20.0
    assert rolling_overhead.roles_run(run) == {"gpu_health": 1, "sglang_server": 2}
