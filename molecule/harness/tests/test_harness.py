"""The harness hosts are real systemd machines in group blackwell that trust the host's CAs."""

import json

import pytest

testinfra_hosts = ["ansible://blackwell"]


def test_systemd_is_pid_1_and_running(host):
    assert host.check_output("ps -p 1 -o comm=") == "systemd"
    state = host.run("systemctl is-system-running --wait")
    # degraded is acceptable: a container lacks some hardware units; starting or offline is not.
    assert state.stdout.strip() in ("running", "degraded"), state.stdout + state.stderr


def test_a_unit_can_be_started(host):
    # Later roles install services: prove systemd in the container really starts units.
    host.run_expect([0], "systemd-run --unit=harness-probe --wait --quiet /bin/true")
    assert "harness-probe" not in host.check_output("systemctl list-units --failed --plain --no-legend")


def test_gpu_info_reported_no_gpu_without_failing(host):
    facts = json.loads(host.file("/var/lib/inferops-harness/gpu_info.json").content_string)
    assert facts["count"] == 0
    assert facts["backend"] == "none"
    assert "nvidia-smi" in facts["reason"]


@pytest.mark.parametrize("path", ["/usr/local/share/ca-certificates/inferops-host-bundle.crt"])
def test_host_ca_bundle_is_trusted(host, path):
    ca = host.file(path)
    assert ca.exists and ca.user == "root"
    first_cert = ca.content_string.split("-----END CERTIFICATE-----")[0]
    assert first_cert.strip() in host.file("/etc/ssl/certs/ca-certificates.crt").content_string


def test_venv_reaches_the_package_index_through_the_trusted_cas(host):
    # Later roles build venvs from the package index; TLS there may be intercepted.
    cmd = host.run(
        "rm -rf /tmp/harness-venv /tmp/harness-dl && python3 -m venv /tmp/harness-venv && "
        "PIP_CERT=/etc/ssl/certs/ca-certificates.crt /tmp/harness-venv/bin/pip download "
        "--quiet --no-deps --dest /tmp/harness-dl six==1.17.0"
    )
    assert cmd.rc == 0, cmd.stderr
    assert host.file("/tmp/harness-dl/six-1.17.0-py2.py3-none-any.whl").exists
