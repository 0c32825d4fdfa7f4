"""Where a command's CPU goes, by process name: `python3 tools/cpu_profile.py [--top N] -- COMMAND...`.

Runs COMMAND under BSD process accounting (acct(2), root only) and prints, for every process that
exited meanwhile, the CPU seconds (user + system) and the count per command name, most first.
Accounting is per pid namespace and a container's processes are written to the host's file too, so
Ansible's modules in the test hosts (python3.11, python3.13), their services and the host's own
controller (ansible-playboo: the kernel keeps 15 characters) are all counted. A process still
running at the end (a server, systemd in a container) has no record yet; nor has the command
itself, so the table's total is below the machine's.
    make test's own figures, docs/testing.md ("Where `make test`'s CPU goes"): tools/cpu_profile.py -- make test
"""

import argparse
import collections
import ctypes
import os
import struct
import subprocess
import sys
import tempfile

# struct acct_v3 (linux/acct.h): 64 bytes; times in AHZ (100) units, comp_t encoded.
RECORD = 64
AHZ = 100


def comp_t(value):
    """A comp_t: a 13-bit mantissa and a 3-bit base-8 exponent."""
    return (value & 0x1fff) << (((value >> 13) & 0x7) * 3)


def records(data):
    """(command name, CPU seconds) of each acct_v3 record in data."""
    for offset in range(0, len(data) - RECORD + 1, RECORD):
        record = data[offset:offset + RECORD]
        if record[1] & 0x0f != 3:
            continue
        utime, stime = struct.unpack_from("<HH", record, 32)
        yield record[48:64].split(b"\0")[0].decode(errors="replace"), (comp_t(utime) + comp_t(stime)) / AHZ


def table(data, top):
    """Markdown lines: CPU seconds, processes and share per command name, most CPU first."""
    cpu, count = collections.Counter(), collections.Counter()
    for name, seconds in records(data):
        cpu[name] += seconds
        count[name] += 1
    total = sum(cpu.values()) or 1
    lines = ["| process name | CPU s | processes | share |", "| --- | --- | --- | --- |"]
    for name, seconds in cpu.most_common(top):
        lines.append("| `%s` | %.0f | %d | %.1f %% |" % (name, seconds, count[name], 100.0 * seconds / total))
    lines.append("| all %d names | %.0f | %d | 100 %% |" % (len(cpu), sum(cpu.values()), sum(count.values())))
    return lines


def acct(path):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.acct(path.encode() if path else None) != 0:
        raise OSError(ctypes.get_errno(), "acct(2): %s" % os.strerror(ctypes.get_errno()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15, help="names to list (default 15)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (after --)")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pacct")
        open(path, "wb").close()
        acct(path)
        try:
            # Not a timeout: the command is the user's whole run (make test takes an hour).
            rc = subprocess.call(command)
        finally:
            acct(None)
        with open(path, "rb") as handle:
            print("\n".join(table(handle.read(), args.top)))
    return rc


if __name__ == "__main__":
    sys.exit(main())
