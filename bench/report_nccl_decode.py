"""Turns tests/gpu/run_nccl_decode.sh's results into the `nccl-decode` section of docs/benchmarks.md.

Usage: python bench/report_nccl_decode.py RESULTS_DIR [--host TEXT] [--doc PATH] [--no-chart]
RESULTS_DIR holds results.txt (`<profile> <json>` lines from tests/gpu/nccl_decode.py and
tests/gpu/decode_loop.py), and, when there, host.txt and summary.txt from the same run. The
section holds all-reduce latency at decode sizes per profile (eager and CUDA-graph) with each
profile's ratio to `none`, bus bandwidth 1 MiB..1 GiB, the stand-in's decode tokens/s, what each
process saw of NCCL_*, and the run's provenance; charts go to docs/bench/nccl-decode*.png.
"""

import argparse
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchdoc  # noqa: E402  pylint: disable=wrong-import-position

SECTION = "nccl-decode"
ORDER = ["none", "auto", "pcie_blackwell", "nvlink"]
BASE = "none"
# set by run_nccl_decode.sh for NCCL's own log, not by any profile
DRIVER_VARS = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS")
COMMAND = "bash tests/gpu/run_nccl_decode.sh"


def load(path):
    """{profile: {"meta": {...}, "latency": {mode: {batch: row}}, "busbw": {bytes: row}, "loop": {...}}}."""
    runs = collections.OrderedDict()
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            profile, payload = line.split(" ", 1)
            row = json.loads(payload)
            run = runs.setdefault(profile, {"meta": {}, "latency": {}, "busbw": {}, "loop": {}, "done": None})
            kind = row.get("kind")
            if kind == "meta":
                run["meta"] = row
            elif kind == "latency":
                run["latency"].setdefault(row["mode"], {})[row["batch"]] = row
            elif kind == "busbw":
                run["busbw"][row["bytes"]] = row
            elif kind == "decode_loop":
                run["loop"] = row
            elif kind == "done":
                run["done"] = row
    return runs


def ordered(runs):
    return [p for p in ORDER if p in runs] + [p for p in runs if p not in ORDER]


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def auto_choice(summary):
    """The profile `auto` resolved to, from site.yml's summary line in summary.txt."""
    match = re.search(r"NCCL profile auto:.*\n.*NCCL profile ([A-Za-z0-9_.-]+)", summary)
    return match.group(1) if match else None


def link_kind(host_txt, world):
    if world < 2:
        return None
    return "NVLink" if re.search(r"\bNV\d+\b", host_txt) else "PCIe / no NVLink"


def host_line(meta, host_txt):
    """'1x NVIDIA H200' or '2x NVIDIA H200, NVLink': the host by what it is."""
    world = meta.get("world", 0)
    names = collections.Counter(meta.get("gpus") or ["?"])
    text = ", ".join("%dx %s" % (count, name) for name, count in names.items())
    link = link_kind(host_txt, world)
    return text + (", linked by " + link if link else "")


def size_text(size):
    size = int(size)
    if size >= 1 << 30:
        return "%g GiB" % (size / float(1 << 30))
    if size >= 1 << 20:
        return "%g MiB" % (size / float(1 << 20))
    return "%g KiB" % (size / 1024.0)


def profile_label(profile, auto):
    return "`auto` (= `%s`)" % auto if profile == "auto" and auto else "`%s`" % profile


def cell(row, key="median_us", digits=1):
    if not row:
        return "-"
    if "error" in row:
        return "failed"
    return benchdoc.fmt(row.get(key), digits)


def latency_table(runs, profiles, mode, auto):
    batches = sorted({b for p in profiles for b in runs[p]["latency"].get(mode, {})})
    others = [p for p in profiles if p != BASE]
    header = ["batch", "message"] + ["%s us" % profile_label(p, auto) for p in profiles]
    header += ["%s / `%s`" % (profile_label(p, auto), BASE) for p in others if BASE in runs]
    rows = []
    for batch in batches:
        cells = [runs[p]["latency"].get(mode, {}).get(batch) for p in profiles]
        size = next((c["bytes"] for c in cells if c), None)
        row = [batch, size_text(size) if size else "-"] + [cell(c) for c in cells]
        base = runs.get(BASE, {}).get("latency", {}).get(mode, {}).get(batch)
        for p in others if BASE in runs else []:
            row.append(ratio_cell(runs[p]["latency"].get(mode, {}).get(batch), base))
        rows.append(row)
    return benchdoc.table(header, rows)


def ratio_cell(row, base, key="median_us"):
    if not row or not base or "error" in row or "error" in base:
        return "-"
    return benchdoc.ratio(row.get(key), base.get(key), 2)


def busbw_table(runs, profiles, world, auto):
    # one rank moves nothing between GPUs: busbw is 0 by definition, algbw is a local figure
    key, unit = ("busbw_gbps", "busbw GB/s") if world > 1 else ("algbw_gbps", "algbw GB/s (1 rank)")
    sizes = sorted({s for p in profiles for s in runs[p]["busbw"]})
    others = [p for p in profiles if p != BASE and BASE in runs]
    header = ["message"] + ["%s %s" % (profile_label(p, auto), unit) for p in profiles]
    header += ["%s / `%s`" % (profile_label(p, auto), BASE) for p in others]
    rows = []
    for size in sizes:
        row = [size_text(size)] + [cell(runs[p]["busbw"].get(size), key) for p in profiles]
        base = runs[BASE]["busbw"].get(size) if BASE in runs else None
        row += [ratio_cell(runs[p]["busbw"].get(size), base, key) for p in others]
        rows.append(row)
    return benchdoc.table(header, rows)


def loop_table(runs, profiles, auto):
    rows = []
    base = runs.get(BASE, {}).get("loop", {}).get("tokens_per_s")
    for p in profiles:
        loop = runs[p]["loop"]
        if not loop:
            continue
        if "error" in loop:
            rows.append([profile_label(p, auto), "failed: %s" % loop["error"][:80], "-", "-", "-"])
            continue
        rows.append([profile_label(p, auto), benchdoc.fmt(loop.get("tokens_per_s")),
                     benchdoc.fmt(loop.get("ms_per_token"), 3), benchdoc.fmt(loop.get("us_per_all_reduce"), 1),
                     benchdoc.ratio(loop.get("tokens_per_s"), base, 2)])
    return benchdoc.table(["profile", "tokens/s", "ms per token", "us per all-reduce (60 a token)",
                           "tokens/s vs `%s`" % BASE], rows)


def env_lines(runs, profiles, auto):
    lines = []
    for p in profiles:
        env = {k: v for k, v in runs[p]["meta"].get("env", {}).items() if k not in DRIVER_VARS}
        same = runs[p]["meta"].get("env_same_on_all_ranks")
        text = " ".join("%s=%s" % item for item in sorted(env.items())) or "(none)"
        lines.append("- %s: %s%s" % (profile_label(p, auto), text, "" if same in (True, None) else
                                     " (**ranks differ**)"))
    return "\n".join(lines)


def spread(runs, profile, mode, batches):
    """(min, max) ratio of `profile` to `none` over the decode sizes, or None."""
    values = []
    for batch in batches:
        row = runs[profile]["latency"].get(mode, {}).get(batch)
        base = runs[BASE]["latency"].get(mode, {}).get(batch)
        if row and base and "error" not in row and "error" not in base and base.get("median_us"):
            values.append(row["median_us"] / base["median_us"])
    return (min(values), max(values)) if values else None


def findings(runs, profiles, world, auto):
    """What the figures say, in sentences made from them; one GPU says only what one rank can."""
    lines = []
    if world < 2:
        lines.append("**One GPU: every figure here is single-rank.** An all-reduce over one rank moves no "
                     "byte between GPUs, so this run shows that the code path works (world size 1, eager and "
                     "captured, the stand-in's decode loop) and what launching costs; it says nothing about an "
                     "NCCL profile's effect on an interconnect. `pcie_blackwell` at decode sizes on NVLink, "
                     "against its 4x cost at 1 GiB in the bandwidth table above, **awaits a host with 2 or more "
                     "GPUs** (the same command there).")
    eager = runs.get(BASE, {}).get("latency", {}).get("eager", {})
    graph = runs.get(BASE, {}).get("latency", {}).get("graph", {})
    pairs = [(b, eager[b]["median_us"], graph[b]["median_us"]) for b in sorted(eager)
             if b in graph and "error" not in graph[b] and "error" not in eager[b]]
    if pairs:
        faster = all(g < e for b, e, g in pairs)
        lines.append("With `none`, a captured all-reduce takes %s to %s us a call against %s to %s us eager "
                     "(batch %d to %d)%s."
                     % (benchdoc.fmt(min(g for b, e, g in pairs), 1), benchdoc.fmt(max(g for b, e, g in pairs), 1),
                        benchdoc.fmt(min(e for b, e, g in pairs), 1), benchdoc.fmt(max(e for b, e, g in pairs), 1),
                        pairs[0][0], pairs[-1][0],
                        ": the difference is the per-call launch cost from Python, which a CUDA graph removes"
                        if faster else ""))
    loop = runs.get(BASE, {}).get("loop", {})
    if loop.get("us_per_all_reduce") and pairs:
        lines.append("The stand-in's decode loop spends %s us per all-reduce (60 a token, eager, batch 1, "
                     "HTTP and scheduling included) against %s us for one eager all-reduce of that size alone."
                     % (benchdoc.fmt(loop["us_per_all_reduce"], 1), benchdoc.fmt(pairs[0][1], 1)))
    if BASE in runs:
        batches = sorted(runs[BASE]["latency"].get("graph", {}))
        for p in profiles:
            if p == BASE:
                continue
            for mode in ("graph", "eager"):
                band = spread(runs, p, mode, batches)
                if band:
                    lines.append("%s / `none`, %s, over the decode sizes: %.2f to %.2f%s." % (
                        profile_label(p, auto), mode, band[0], band[1],
                        " (one rank: differences are noise or launch overhead, not the interconnect)"
                        if world < 2 else ""))
    return "\n".join("- " + line if not line.startswith("**") else line for line in lines)


def provenance(meta, host_txt, results_dir):
    date = re.search(r"date: (\S+)", host_txt)
    platform = re.search(r"platform: (.*)", host_txt)
    return ("Command, on the GPU host from the repo root (`.whl` carried: ansible-core 2.21.5 and its "
            "dependencies, uv): `%s`. Report: `python bench/report_nccl_decode.py %s`. Host: %s; driver %s, "
            "NCCL %s, torch %s (CUDA %s), %s; run %s. Raw lines in `%s/results.txt`, logs in `logs.tgz`."
            % (COMMAND, results_dir, host_line(meta, host_txt), meta.get("driver") or "?", meta.get("nccl") or "?",
               meta.get("torch") or "?", meta.get("cuda") or "?",
               platform.group(1) if platform else "platform variables not recorded",
               date.group(1) if date else "(date not recorded)", results_dir))


def method(meta):
    return ("Latency: bf16 all-reduce of (batch x %d), back to back, timed with CUDA events, the slowest rank's "
            "time per round; eager = %d `dist.all_reduce` calls from Python a round, graph = the same %d captured "
            "in one CUDA graph and replayed; median over %d rounds or replays after warm-up, per call. "
            "Bandwidth: float32, median of 3 rounds of 20 after 3 warm-ups. Decode loop: the GPU stand-in with "
            "`--tp <GPUs>`, `SGLANG_STANDIN_LAYERS=60 SGLANG_STANDIN_HIDDEN=7168` (60 eager all-reduces of "
            "1 x 7168 bf16 a token, batch 1), 2 untimed then 10 timed `POST /generate` of 64 tokens one after another."
            % (meta.get("hidden", 7168), meta.get("ops", 100), meta.get("ops", 100), meta.get("rounds", 30)))


def latency_chart(runs, profiles, auto):
    """Latency against message size, one line per profile and mode; None without matplotlib."""
    try:
        import matplotlib  # pylint: disable=import-outside-toplevel
        matplotlib.use("Agg")
        from matplotlib import pyplot  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    os.makedirs(benchdoc.CHARTS, exist_ok=True)
    figure, axes = pyplot.subplots(figsize=(7, 3.8), dpi=110)
    ticks = set()
    for index, p in enumerate(profiles):
        for mode, style in (("graph", "-"), ("eager", "--")):
            rows = [r for b, r in sorted(runs[p]["latency"].get(mode, {}).items()) if "error" not in r]
            if rows:
                ticks.update(r["bytes"] / 1024.0 for r in rows)
                # one colour a profile, the line style tells the mode
                axes.plot([r["bytes"] / 1024.0 for r in rows], [r["median_us"] for r in rows], style, marker="o",
                          markersize=3, color="C%d" % index,
                          label="%s %s" % (profile_label(p, auto).replace("`", ""), mode))
    axes.set_xscale("log", base=2)
    axes.set_xticks(sorted(ticks))
    axes.set_xticklabels(["%g" % t for t in sorted(ticks)], fontsize=7)
    axes.minorticks_off()
    axes.set_xlabel("message (KiB), bf16 7168 x batch 1..128")
    axes.set_ylabel("us per all-reduce (median)")
    axes.set_title("All-reduce latency at decode sizes per NCCL profile", fontsize=10)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(os.path.join(benchdoc.CHARTS, SECTION + ".png"))
    pyplot.close(figure)
    return "![All-reduce latency at decode sizes](bench/%s.png)" % SECTION


def loop_chart(runs, profiles, auto):
    series = [(profile_label(p, auto).replace("`", ""), runs[p]["loop"].get("request_tokens_per_s", []))
              for p in profiles if runs[p]["loop"].get("request_tokens_per_s")]
    if not series:
        return None
    try:
        return benchdoc.chart(SECTION + "-loop", "Stand-in decode, 60 all-reduces a token: tokens/s per request",
                              "tokens/s", series)
    except ImportError:
        return None


def pending(results_dir, host_txt, summary, host, note):
    """A run that measured nothing: what was tried, on what, and why nothing came of it."""
    gpus = re.search(r"^gpus: (\d+)", host_txt, re.M)
    names = re.findall(r"^GPU \d+: (.*?) \(UUID", host_txt, re.M)
    described = host or ("%dx %s" % (len(names), names[0]) if names else "host not recorded")
    date = re.search(r"date: (\d{4}-\d\d-\d\d)", host_txt)
    return "\n\n".join([
        "## NCCL all-reduce at decode sizes per runtime_env NCCL profile (%s, %s): no figures yet"
        % (date.group(1) if date else "undated", described),
        "Command, on the GPU host from the repo root (`.whl` carried): `%s`; report: "
        "`python bench/report_nccl_decode.py %s`." % (COMMAND, results_dir),
        method({}),
        "The last run (%s, %s GPU(s)) measured nothing; its summary (`%s/summary.txt`):"
        % (described, gpus.group(1) if gpus else "?", results_dir),
        "```\n%s\n```" % summary.strip()] + ([note] if note else []) + [
        "**Figures await a rerun of the command above; interconnect figures (and what `pcie_blackwell` does at "
        "decode sizes on NVLink, against its 4x cost at 1 GiB) await a host with 2 or more GPUs.**"])


def section(results_dir, host=None, charts=True, note=None):
    runs = load(os.path.join(results_dir, "results.txt"))
    host_txt, summary = read(os.path.join(results_dir, "host.txt")), read(os.path.join(results_dir, "summary.txt"))
    if not runs:
        return pending(results_dir, host_txt, summary, host, note)
    profiles = ordered(runs)
    meta = next((runs[p]["meta"] for p in profiles if runs[p]["meta"]), {})
    world = meta.get("world", 0)
    auto = auto_choice(summary)
    date = re.search(r"date: (\d{4}-\d\d-\d\d)", host_txt)
    described = host or host_line(meta, host_txt)
    title = "## NCCL all-reduce at decode sizes per runtime_env NCCL profile (%s, %s)" % (
        date.group(1) if date else "undated", described)
    parts = [title, provenance(meta, host_txt, results_dir), method(meta)] + ([note] if note else [])
    parts += [
        findings(runs, profiles, world, auto),
        "Latency, CUDA graph (as SGLang runs decode):", latency_table(runs, profiles, "graph", auto),
        "Latency, eager:", latency_table(runs, profiles, "eager", auto),
        "Bandwidth, 1 MiB to 1 GiB:", busbw_table(runs, profiles, world, auto),
        "Stand-in decode loop (`tests/gpu/decode_loop.py`, --tp %s):" % (runs[profiles[0]]["loop"].get("tp", "?")),
        loop_table(runs, profiles, auto),
        "What each measuring process saw of NCCL_* (from the ml-env venv's start-up hook and the platform; "
        "the script's own NCCL_DEBUG left out):", env_lines(runs, profiles, auto)]
    if charts:
        parts += [c for c in (latency_chart(runs, profiles, auto), loop_chart(runs, profiles, auto)) if c]
    return "\n\n".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("results_dir")
    parser.add_argument("--host", help="host description (default: from the results, e.g. '1x NVIDIA H200')")
    parser.add_argument("--doc", default=benchdoc.DOC)
    parser.add_argument("--no-chart", action="store_true")
    parser.add_argument("--note", help="a paragraph of the reporter's own, put after the method")
    parser.add_argument("--print-only", action="store_true", help="print the section, write nothing")
    args = parser.parse_args(argv)
    text = section(args.results_dir.rstrip("/"), args.host, charts=not args.no_chart and not args.print_only,
                   note=args.note)
    if not args.print_only:
        # benchdoc rereads the document right before it writes: other sections may have changed meanwhile
        benchdoc.write_section(SECTION, text, args.doc)
    print(text)


if __name__ == "__main__":
    main()
