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


def test_gpu_health_reports_a_host_without_gpus_and_require_decides(host):
    results = json.loads(host.file("/var/lib/inferops-harness/gpu_health.json").content_string)
    reporting, required = results["reporting"], results["required"]
    # require: [] reports every failure as a warning and passes.
    assert reporting["healthy"] is True and reporting["problems"] == [] and reporting["count"] == 0
    checks = reporting["checks"]
    assert checks["driver"]["status"] == "fail" and "driver" in checks["driver"]["summary"].lower()
    assert checks["gpus"]["status"] == "ok" and checks["gpus"]["value"]["count"] == 0
    assert {checks[name]["status"] for name in ("pcie", "p2p", "gpu_clean")} == {"skipped"}
    assert checks["xid"]["status"] in ("ok", "warn")  # a container may not read the kernel log
    assert any(line.startswith("driver: ") for line in reporting["advisories"])
    # The same host with the driver and eight GPUs required fails, naming both.
    assert required["healthy"] is False  # failed_when: false keeps the result, not the failure
    assert [line.split(":")[0] for line in required["problems"]] == ["driver", "gpus"]
    assert "8" in required["problems"][1] and "0" in required["problems"][1]
    assert required["msg"].startswith("node not fit to serve, 2 problems")


def test_the_hosts_are_the_two_supported_debian_releases(host):
    # One host per release the collection is tested on (molecule.yml's images).
    name = host.backend.get_hostname()
    want = {"inferops-harness-1": "12", "inferops-harness-2": "13"}[name]
    assert host.system_info.distribution == "debian"
    assert host.system_info.release.split(".")[0] == want
