"""tools/cpu_profile.py: acct_v3 records read back by name, on synthetic records and for real."""

import os
import shutil
import struct
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import cpu_profile  # noqa: E402


def record(name, utime, stime, version=3):
    """A struct acct_v3 as the kernel writes it (times already comp_t encoded)."""
    data = bytearray(64)
    data[1] = version
    struct.pack_into("<II", data, 16, 1234, 1)
    struct.pack_into("<HH", data, 32, utime, stime)
    data[48:48 + len(name)] = name.encode()
    return bytes(data)


def test_comp_t_has_a_base_8_exponent():
    assert cpu_profile.comp_t(250) == 250
    # mantissa 4096, exponent 2: 4096 * 8^2 (a process of 2621 s)
    assert cpu_profile.comp_t((2 << 13) | 4096) == 4096 * 64


def test_records_by_name_most_cpu_first():
    data = (record("ansible-playboo", 30, 5) + record("python3.11", 20, 2) + record("ansible-playboo", 100, 0)
            + record("old-format", 999, 0, version=2) + b"\0" * 10)
    assert list(cpu_profile.records(data)) == [("ansible-playboo", 0.35), ("python3.11", 0.22),
                                               ("ansible-playboo", 1.0)]
    lines = cpu_profile.table(data, top=5)
    assert lines[2] == "| `ansible-playboo` | 1 | 2 | 86.0 % |"
    assert lines[3] == "| `python3.11` | 0 | 1 | 14.0 % |"
    assert lines[-1] == "| all 2 names | 2 | 3 | 100 % |"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="acct(2) and unshare need root")
def test_a_command_run_under_accounting_is_counted():
    # In a pid namespace of its own: accounting is per namespace, so the machine's own (if any) is
    # left as it was.
    burn = "x = 0\nfor i in range(3000000): x += i"
    done = subprocess.run(["unshare", "--pid", "--fork", sys.executable, os.path.join(ROOT, "tools", "cpu_profile.py"),
                           "--", "sh", "-c", "%s -c '%s'; exit 3" % (sys.executable, burn)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| `")]
    names = [row.split("`")[1] for row in rows]
    assert "sh" in names and os.path.basename(sys.executable)[:15] in names, done.stdout
