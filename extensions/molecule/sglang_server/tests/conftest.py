"""Helpers of the sglang_server verifier: the role's variables and requests from inside the host."""

import json
import shlex

import pytest

UNIT = "sglang-server.service"


@pytest.fixture(name="variables")
def fixture_variables(host):
    return host.ansible.get_variables()


def show(host, *properties):
    """{property: value} of the unit (systemctl show)."""
    out = host.check_output("systemctl show %s %s" % (UNIT, " ".join("--property=" + p for p in properties)))
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def main_pid(host):
    return int(show(host, "MainPID")["MainPID"])


def jit_dir(host):
    """The JIT cache of this toolkit (the scenario's 13.0.88) and the current ml-env release."""
    return "/var/cache/sglang/jit/cuda-13.0.88/%s" % host.file("/opt/ml-env").linked_to.rsplit("/", 1)[1]


def request(host, path, key=None, body=None, port=30000):
    """(status, body text) of an HTTP request to the server, made on the host with curl."""
    argv = ["curl", "-s", "-o", "/dev/stdout", "-w", "\\n%{http_code}", "--max-time", "30"]
    if key:
        argv += ["-H", "Authorization: Bearer " + key]
    if body is not None:
        argv += ["-H", "Content-Type: application/json", "--data", json.dumps(body)]
    argv.append("http://127.0.0.1:%d%s" % (port, path))
    out = host.run(" ".join(shlex.quote(a) for a in argv))
    assert out.rc == 0, out.stderr
    text, dummy, status = out.stdout.rpartition("\n")
    return int(status), text
