"""What every benchmark shares: its section of docs/benchmarks.md, its provenance, medians and charts.

A benchmark writes one section between `<!-- NAME:start -->` and `<!-- NAME:end -->`, replacing
the last run's (or appending a new section), and its charts to docs/bench/NAME*.png. Standard
library only, except `chart`, which imports matplotlib (in the tool venv) when it is called.
"""

import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
CHARTS = os.path.join(ROOT, "docs", "bench")


def write_section(name, text, doc=DOC):
    """Put `text` between NAME's markers in `doc` (appended when the markers are not there yet)."""
    start, end = "<!-- %s:start -->" % name, "<!-- %s:end -->" % name
    section = "%s\n%s\n%s" % (start, text.strip("\n"), end)
    with open(doc) as handle:
        current = handle.read()
    if start in current and end in current:
        current = current[:current.index(start)] + section + current[current.index(end) + len(end):]
    else:
        current = current.rstrip("\n") + "\n\n" + section + "\n"
    with open(doc, "w") as handle:
        handle.write(current)


def command(target):
    """The make target, with the script's arguments when it was run with any."""
    args = sys.argv[1:]
    if not args:
        return "`%s`" % target
    return "`%s` (`python %s %s`)" % (target, os.path.relpath(sys.argv[0], ROOT), " ".join(args))


def provenance(command, extra=""):
    """One line: the command, the date, the machine and the versions that made the figures."""
    return ("Command: %s, %s. Machine: %s, %d CPUs, Python %s, ansible-core %s%s." % (
        command, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), platform.platform(terse=True),
        os.cpu_count(), platform.python_version(), ansible_version(), extra))


def ansible_version():
    try:
        out = subprocess.run(["ansible", "--version"], capture_output=True, text=True, timeout=60,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return out.split("[core ")[1].split("]")[0] if "[core " in out else "?"


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, digits=1):
    return "-" if value is None else "%.*f" % (digits, value)


def ratio(numerator, denominator, digits=1):
    if numerator is None or not denominator:
        return "-"
    return "%.*fx" % (digits, numerator / denominator)


def table(header, rows):
    """A markdown table from a header list and rows of cells."""
    lines = ["| %s |" % " | ".join(header), "| %s |" % " | ".join("---" for dummy in header)]
    lines += ["| %s |" % " | ".join(str(cell) for cell in row) for row in rows]
    return "\n".join(lines)


def chart(name, title, ylabel, series, log=False):
    """A bar chart of the medians with every run as a dot: series is [(label, [values]), ...].

    Writes docs/bench/NAME.png and returns the markdown that shows it.
    """
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot

    os.makedirs(CHARTS, exist_ok=True)
    figure, axes = pyplot.subplots(figsize=(7, 3.6), dpi=110)
    labels = [label for label, values in series]
    medians = [median(values) or 0 for label, values in series]
    axes.bar(range(len(series)), medians, color="#4c72b0", alpha=0.75)
    for index, (label, values) in enumerate(series):
        axes.scatter([index] * len(values), values, color="black", s=12, zorder=3)
        axes.annotate(fmt(medians[index], 2), (index, medians[index]), ha="center", va="bottom", fontsize=8)
    axes.set_xticks(range(len(series)))
    axes.set_xticklabels(labels, fontsize=8)
    axes.set_ylabel(ylabel)
    axes.set_title(title, fontsize=10)
    if log:
        axes.set_yscale("log")
    figure.tight_layout()
    path = os.path.join(CHARTS, name + ".png")
    figure.savefig(path)
    pyplot.close(figure)
    return "![%s](bench/%s.png)" % (title, name)
