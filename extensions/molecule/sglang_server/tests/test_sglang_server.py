"""The state the scenario leaves: the server of converge, serving behind its hardened unit."""

import json

import pytest

from conftest import UNIT, jit_dir, main_pid, request, show

testinfra_hosts = ["ansible://blackwell"]
SECRETS = ("sglang_server_api_key", "sglang_server_hf_token")


def test_unit_is_active_enabled_and_verifies_cleanly(host):
    assert host.service(UNIT).is_running and host.service(UNIT).is_enabled
    out = host.run("systemd-analyze verify /etc/systemd/system/%s" % UNIT)
    # verify exits 0 on many problems (a setting outside its section): the output must be empty.
    assert (out.rc, out.stdout + out.stderr) == (0, "")


def test_server_runs_as_a_non_root_system_user(host):
    user = host.user("sglang")
    assert user.uid != 0 and user.uid < 1000
    assert user.shell == "/usr/sbin/nologin" and user.home == "/var/lib/sglang"
    cgroup = show(host, "ControlGroup")["ControlGroup"]
    # cgroup v2, or v1 with systemd's own hierarchy (as on this CI host).
    pids = sorted(set(host.check_output(
        "for root in /sys/fs/cgroup /sys/fs/cgroup/systemd /sys/fs/cgroup/unified; do"
        " cat $root%s/cgroup.procs 2>/dev/null; done; true" % cgroup).split()))
    assert len(pids) >= 2  # the main process and its rank
    assert set(host.check_output("ps -o user= -p %s" % ",".join(pids)).split()) == {"sglang"}


@pytest.mark.parametrize("path, user, group, mode", [
    ("/etc/sglang/sglang-server.yaml", "sglang", "sglang", 0o600),
    ("/etc/sglang/sglang-server.env", "root", "root", 0o600),
    # Root's: systemd opens the log as root, the module writes beside it as root.
    ("/var/log/sglang", "root", "sglang", 0o750),
    ("/var/log/sglang/sglang-server.log", "root", "sglang", 0o640),
    ("/var/lib/sglang", "sglang", "sglang", 0o750),
    ("/var/cache/sglang", "root", "root", 0o755),
    ("/var/cache/sglang/huggingface", "sglang", "sglang", 0o750),
    ("/etc/systemd/system/sglang-server.service", "root", "root", 0o644),
    ("/etc/logrotate.d/sglang-server", "root", "root", 0o644),
])
def test_owners_and_modes(host, path, user, group, mode):
    f = host.file(path)
    assert (f.user, f.group, f.mode) == (user, group, mode)


def test_service_user_cannot_plant_files_where_root_writes(host):
    for directory in ("/var/log/sglang", "/var/cache/sglang", "/var/cache/sglang/jit", "/etc/sglang"):
        out = host.run("setpriv --reuid=sglang --regid=sglang --clear-groups ln -s /etc/passwd %s/planted" % directory)
        assert out.rc != 0, directory


def test_config_file_holds_the_api_key_for_sglang(host, variables):
    assert host.file("/etc/sglang/sglang-server.yaml").content_string.splitlines()[-1] == \
        "api-key: %s" % json.dumps(variables["sglang_server_api_key"])


def test_listens_on_loopback_only(host):
    listeners = host.check_output("ss -Htln 'sport = :30000'").splitlines()
    assert [line.split()[3] for line in listeners] == ["127.0.0.1:30000"]


def test_health_generate_and_an_own_generation(host, variables):
    assert request(host, "/health_generate")[0] == 200
    status, text = request(host, "/generate", key=variables["sglang_server_api_key"],
                           body={"text": "The capital of France is", "sampling_params": {"max_new_tokens": 4}})
    assert status == 200, text
    assert json.loads(text)["meta_info"]["completion_tokens"] >= 1


def test_metrics_are_served_without_the_key(host):
    status, text = request(host, "/metrics")
    assert status == 200 and "sglang:" in text


def test_api_key_is_required(host, variables):
    assert request(host, "/v1/models")[0] == 401
    assert request(host, "/v1/models", key="sk-wrong")[0] == 401
    status, text = request(host, "/v1/models", key=variables["sglang_server_api_key"])
    assert status == 200 and json.loads(text)["data"][0]["id"] == variables["sglang_server_served_model_name"]


@pytest.mark.parametrize("secret", SECRETS)
def test_secret_is_in_no_argv_unit_or_unit_property(host, variables, secret):
    value = variables[secret]
    assert value not in host.check_output("systemctl show %s --property=ExecStart --property=Environment" % UNIT)
    assert value not in host.file("/etc/systemd/system/%s" % UNIT).content_string
    # Every process's argv, NUL-separated (the key must not be in the server's, nor anyone's).
    argvs = host.check_output("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
    assert "sglang.launch_server" in argvs and value not in argvs


def test_server_gets_the_token_the_runtime_environment_and_the_jit_caches(host, variables):
    environ = dict(line.split("=", 1) for line in host.check_output(
        "tr '\\0' '\\n' < /proc/%d/environ" % main_pid(host)).splitlines() if "=" in line)
    assert environ["HF_TOKEN"] == variables["sglang_server_hf_token"]
    assert environ["SGLANG_DISABLE_CUDNN_CHECK"] == "1" and environ["CUDA_HOME"] == "/usr/local/cuda-13.0"
    key = jit_dir(host)
    # One root, laid out as sglang 0.5.23 lays it out (roles/sglang_server/vars/main.yml).
    assert environ["SGLANG_CACHE_DIR"] == environ["FLASHINFER_WORKSPACE_BASE"] == key
    for name, sub in (("TRITON_CACHE_DIR", "triton"), ("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("CUDA_CACHE_PATH", "nv"),
                      ("SGLANG_DG_CACHE_DIR", "deep_gemm")):
        assert environ[name] == key + "/" + sub, name
    jit = host.file(key)
    assert jit.is_directory and jit.user == "sglang"


def test_hardening(host):
    props = show(host, "User", "NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "ReadWritePaths",
                 "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups",
                 "RestrictSUIDSGID", "LockPersonality", "RestrictRealtime", "ProtectClock", "ProtectHostname",
                 "PrivateDevices", "MemoryDenyWriteExecute", "DevicePolicy", "DeviceAllow", "KillMode",
                 "Restart", "LimitMEMLOCK")
    assert props == {
        "User": "sglang", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
        "PrivateTmp": "yes", "ReadWritePaths": "%s %s /var/lib/sglang" % (jit_dir(host), "/var/cache/sglang/huggingface"),
        "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes", "ProtectKernelLogs": "yes",
        "ProtectControlGroups": "yes", "RestrictSUIDSGID": "yes", "LockPersonality": "yes",
        "RestrictRealtime": "yes", "ProtectClock": "yes", "ProtectHostname": "yes",
        # The GPUs: no private /dev and no device allow-list (no DeviceAllow: ProtectClock adds none on
        # systemd >= 252).
        "PrivateDevices": "no", "MemoryDenyWriteExecute": "no", "DevicePolicy": "auto",
        "KillMode": "mixed", "Restart": "on-failure", "LimitMEMLOCK": "infinity",
    }


def test_server_output_goes_to_the_log(host):
    log = host.file("/var/log/sglang/sglang-server.log").content_string
    # The start marker of either release (0.5.9's dataclass repr or 0.5.23's dict), then the ready line.
    assert ("server_args=ServerArgs(" in log or "server_args={" in log) and "The server is fired up and ready to roll!" in log


def test_logrotate_accepts_its_file(host):
    out = host.run("logrotate -d /etc/logrotate.d/sglang-server")
    assert out.rc == 0 and "error" not in (out.stdout + out.stderr).lower(), out.stdout + out.stderr


def test_each_host_serves_the_release_it_names(host, variables):
    # inferops-sglang-1 plays sglang 0.5.9, inferops-sglang-2 0.5.23 (molecule.yml): the arguments are
    # that release's, and the server speaks it (its start marker, the shape of its /v1/loads).
    version = variables.get("sglang_server_sglang_version", "0.5.9")
    unit = host.file("/etc/systemd/system/%s" % UNIT).content_string
    log = host.file("/var/log/sglang/sglang-server.log").content_string
    status, text = request(host, "/v1/loads?include=core", key=variables["sglang_server_api_key"])
    assert status == 200, text
    loads = json.loads(text)
    if version == "0.5.23":
        assert "--cuda-graph-max-bs-decode 128" in unit and "server_args={" in log
        assert "accelerator" in loads and "aggregate" not in loads
    else:
        assert "--cuda-graph-max-bs 128" in unit and "server_args=ServerArgs(" in log
        assert "aggregate" in loads
    assert loads["loads"][0]["num_running_reqs"] == 0
