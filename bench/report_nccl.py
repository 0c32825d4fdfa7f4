"""Turns bench/nccl_profiles.sh's bench.txt into the all-reduce table of docs/benchmarks.md.

Usage: python bench/report_nccl.py BENCH_TXT HOST_DESCRIPTION > docs/benchmarks.md section
Lines are `<profile> <json>` with busbw_gbps keyed by message size in bytes.
"""

import json
import sys


def mib(size):
    size = int(size)
    return "%d GiB" % (size >> 30) if size >= 1 << 30 else "%d MiB" % (size >> 20)


def main(path, host):
    rows = {}
    for line in open(path, encoding="utf-8"):
        profile, payload = line.split(" ", 1)
        rows[profile] = json.loads(payload)["busbw_gbps"]
    profiles = list(rows)
    sizes = sorted(next(iter(rows.values())), key=int)
    base = "none" if "none" in rows else profiles[0]
    print("| message | " + " | ".join("`%s` GB/s" % p for p in profiles) + " | " +
          " | ".join("`%s` / `%s`" % (p, base) for p in profiles if p != base) + " |")
    print("| --- " * (1 + 2 * len(profiles) - 1) + "|")
    for size in sizes:
        cells = ["%.1f" % rows[p][size] for p in profiles]
        ratios = ["%.2f" % (rows[p][size] / rows[base][size]) for p in profiles if p != base]
        print("| %s | %s | %s |" % (mib(size), " | ".join(cells), " | ".join(ratios)))
    print()
    print("Host: %s. Bus bandwidth as nccl-tests defines it (algbw x 2(n-1)/n), mean of 20 all-reduces "
          "of float32 after 3 warm-ups, one process per GPU." % host)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
