"""Helpers shared by the runtime_env tests: read the rendered spec and dump environments."""

import json

import pytest

SPEC = "/etc/inferops/runtime-env.json"
ENV_FILE = "/etc/inferops/runtime-env.env"
PROFILE = "/etc/profile.d/inferops-runtime-env.sh"
VENV_PY = "/opt/ml-env/bin/python"
SYS_PY = "/usr/bin/python3"
CUDA_BIN = "/usr/local/cuda-13.0/bin"
DUMP = "import json, os; print(json.dumps(dict(os.environ)))"


@pytest.fixture(name="spec")
def fixture_spec(host):
    return json.loads(host.file(SPEC).content_string)


def python_env(host, python, prefix=""):
    """The environment a fresh interpreter of `python` sees (prefix: e.g. 'NCCL_ALGO=Tree ')."""
    return json.loads(host.check_output("%s%s -c '%s'" % (prefix, python, DUMP)))


def env0(host, command):
    """Parse `env -0` output of a command line (not Python, so no hook is involved)."""
    out = host.run(command)
    assert out.rc == 0, out.stderr
    return dict(line.split("=", 1) for line in out.stdout.split("\0") if "=" in line)


def renderings_env(host, python):
    """What each rendering gives: the Python hook (fresh interpreter), a login shell, a systemd unit."""
    return {
        "hook": python_env(host, python),
        "profile.d": env0(host, "bash -lc 'env -0'"),
        "EnvironmentFile": env0(host, "systemd-run --quiet --wait --pipe -p EnvironmentFile=%s /usr/bin/env -0" % ENV_FILE),
    }


def site_dir(host, python, expr):
    return host.check_output("%s -c \"import site, sysconfig; print(%s)\"" % (python, expr))
