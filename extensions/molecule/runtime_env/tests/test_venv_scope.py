"""Scope venv (inferops-rtenv-1, NCCL profile auto from a PCIe topology): the venv's interpreters,
their children, login shells and systemd units get one spec; /usr/bin/python3 stays untouched."""

import json

import pytest

from conftest import CUDA_BIN, ENV_FILE, PROFILE, SPEC, SYS_PY, VENV_PY, env0, python_env, renderings_env, site_dir

testinfra_hosts = ["ansible://inferops-rtenv-1"]

PCIE_BLACKWELL = {
    "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS",
    "NCCL_MAX_NCHANNELS": "16", "NCCL_BUFFSIZE": "16777216", "NCCL_NTHREADS": "512",
}


def test_spec_holds_toolkit_profile_and_sglang_values(spec):
    assert spec["vars"]["CUDA_HOME"] == "/usr/local/cuda-13.0"
    assert spec["vars"]["TRITON_PTXAS_PATH"] == "/usr/local/cuda-13.0/bin/ptxas"
    assert spec["vars"]["SGLANG_DISABLE_CUDNN_CHECK"] == "1"
    assert {k: spec["vars"][k] for k in PCIE_BLACKWELL} == PCIE_BLACKWELL
    assert "NCCL_NVLS_ENABLE" not in spec["vars"] and "TORCH_SYMM_MEM_DISABLE_MULTICAST" not in spec["vars"]
    assert spec["path_prepend"] == [CUDA_BIN]


def test_both_ptxas_variables_and_the_sm120_profile_are_in_all_three_renderings(host, spec):
    # runtime_env_compute_capability "12.0" here (no GPU in the container): the SM120 profile.
    assert host.ansible.get_variables()["runtime_env_compute_capability"] == "12.0"
    want = {"TRITON_PTXAS_PATH": "/usr/local/cuda-13.0/bin/ptxas", "TRITON_PTXAS_BLACKWELL_PATH": "/usr/local/cuda-13.0/bin/ptxas",
            "FLASHINFER_CUDA_ARCH_LIST": "12.0a", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}
    assert {k: spec["vars"].get(k) for k in want} == want
    for rendering, env in renderings_env(host, VENV_PY).items():
        assert {k: env.get(k) for k in want} == want, rendering


def test_topology_in_another_case_selects_the_pcie_profile(host, spec):
    # The inventory says PCIe, gpu_info says pcie: the same topology.
    assert host.ansible.get_variables()["runtime_env_topology"] == "PCIe"
    assert {k: spec["vars"].get(k) for k in PCIE_BLACKWELL} == PCIE_BLACKWELL


def test_sglang_switch_given_as_the_string_true_is_in_all_three_renderings(host):
    assert host.ansible.get_variables()["runtime_env_sglang_disable_cudnn_check"] == "true"
    for rendering, env in renderings_env(host, VENV_PY).items():
        assert env.get("SGLANG_DISABLE_CUDNN_CHECK") == "1", rendering


def test_venv_python_sees_the_spec(host, spec):
    env = python_env(host, VENV_PY)
    assert {k: env.get(k) for k in spec["vars"]} == spec["vars"]
    assert host.check_output(VENV_PY + " -c 'import os; print(os.environ.get(\"NCCL_ALGO\"))'") == "Ring"


def test_system_python_is_left_alone(host, spec):
    assert host.check_output(SYS_PY + " -c 'import os; print(os.environ.get(\"NCCL_ALGO\"))'") == "None"
    env = python_env(host, SYS_PY)
    assert not set(spec["vars"]) & set(env)
    assert CUDA_BIN not in env["PATH"].split(":")
    system_site = site_dir(host, SYS_PY, "site.getsitepackages()[0]")
    assert not host.file(system_site + "/inferops_runtime_env.pth").exists


@pytest.mark.parametrize("value", ["Tree", ""])
def test_a_variable_already_set_wins(host, value):
    # setdefault: an operator's one-off value (even an empty one) is never overwritten.
    env = python_env(host, VENV_PY, prefix="NCCL_ALGO='%s' NCCL_NVLS_ENABLE=0 " % value)
    assert env["NCCL_ALGO"] == value
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["NCCL_PROTO"] == "LL"


def test_a_subprocess_inherits_the_spec(host):
    # The child is not Python (printenv), so only inheritance can give it the values.
    child = "import subprocess; print(subprocess.check_output(['printenv', 'NCCL_ALGO', 'CUDA_HOME']).decode())"
    assert host.check_output('%s -c "%s"' % (VENV_PY, child)).split() == ["Ring", "/usr/local/cuda-13.0"]


def test_path_gets_the_cuda_bin_once_even_in_nested_interpreters(host):
    nested = "import subprocess, sys; print(subprocess.check_output([sys.executable, '-c', 'import os; print(os.environ[\\\"PATH\\\"])']).decode().strip())"
    for path in (python_env(host, VENV_PY)["PATH"], host.check_output('%s -c "%s"' % (VENV_PY, nested))):
        entries = path.split(":")
        assert entries[0] == CUDA_BIN and entries.count(CUDA_BIN) == 1, path
    # Already on PATH (e.g. from profile.d): not prepended again.
    env = python_env(host, VENV_PY, prefix="PATH=/usr/bin:%s:/bin " % CUDA_BIN)
    assert env["PATH"] == "/usr/bin:%s:/bin" % CUDA_BIN


def test_login_shell_sees_the_same_values(host, spec):
    env = env0(host, "bash -lc 'env -0'")
    assert {k: env.get(k) for k in spec["vars"]} == spec["vars"]
    assert env["PATH"].split(":")[0] == CUDA_BIN
    assert env["PATH"].split(":").count(CUDA_BIN) == 1
    # setdefault in the shell too, and no duplicate PATH entry in a nested login shell.
    env = env0(host, "NCCL_ALGO=Tree bash -lc 'bash -lc \"env -0\"'")
    assert env["NCCL_ALGO"] == "Tree"
    assert env["PATH"].split(":").count(CUDA_BIN) == 1


def test_systemd_unit_with_the_environment_file_sees_the_same_values(host, spec):
    env = env0(host, "systemd-run --quiet --wait --pipe -p EnvironmentFile=%s /usr/bin/env -0" % ENV_FILE)
    assert {k: env.get(k) for k in spec["vars"]} == spec["vars"]
    assert env["PATH"].split(":")[0] == CUDA_BIN


def test_quoting_survives_every_rendering(host, spec):
    probe = "it's \"quoted\" $HOME `x` \\ end"
    assert spec["vars"]["INFEROPS_QUOTING_PROBE"] == probe
    assert python_env(host, VENV_PY)["INFEROPS_QUOTING_PROBE"] == probe
    assert env0(host, "bash -lc 'env -0'")["INFEROPS_QUOTING_PROBE"] == probe
    unit = env0(host, "systemd-run --quiet --wait --pipe -p EnvironmentFile=%s /usr/bin/env -0" % ENV_FILE)
    assert unit["INFEROPS_QUOTING_PROBE"] == probe


def test_files_are_root_owned_0644(host):
    venv_site = site_dir(host, VENV_PY, "sysconfig.get_paths()['purelib']")
    paths = [SPEC, ENV_FILE, PROFILE, venv_site + "/inferops_runtime_env.pth", venv_site + "/inferops_runtime_env.py"]
    for path in paths:
        f = host.file(path)
        assert (f.is_file, f.user, f.group, f.mode) == (True, "root", "root", 0o644), path


def test_a_broken_spec_never_breaks_the_interpreter(host):
    host.run_expect([0], "printf '{not json' > /tmp/broken-spec.json")
    quiet = host.run("INFEROPS_RUNTIME_ENV_SPEC=/tmp/broken-spec.json %s -c 'import os; print(os.environ.get(\"NCCL_ALGO\"))'" % VENV_PY)
    assert (quiet.rc, quiet.stdout.strip(), quiet.stderr) == (0, "None", "")
    missing = host.run("INFEROPS_RUNTIME_ENV_SPEC=/nonexistent INFEROPS_RUNTIME_ENV_DEBUG=1 %s -c 'print(1)'" % VENV_PY)
    assert missing.rc == 0 and missing.stdout.strip() == "1"
    assert missing.stderr.startswith("inferops_runtime_env: spec not applied:") and missing.stderr.count("\n") == 1


def test_a_venv_sitecustomize_would_be_shadowed_by_the_distro_file(host):
    # Why the hook is a .pth: the same module saved as the venv's sitecustomize.py never runs on
    # Debian/Ubuntu, because /usr/lib/python3.X/sitecustomize.py comes first on sys.path.
    host.run_expect([0], "rm -rf /tmp/shadow-venv && %s -m venv /tmp/shadow-venv" % SYS_PY)
    site = site_dir(host, "/tmp/shadow-venv/bin/python", "sysconfig.get_paths()['purelib']")
    hook = site_dir(host, VENV_PY, "sysconfig.get_paths()['purelib']") + "/inferops_runtime_env.py"
    host.run_expect([0], "cp %s %s/sitecustomize.py" % (hook, site))
    probe = "import os, sitecustomize; print(os.environ.get('NCCL_ALGO'), sitecustomize.__file__)"
    assert host.check_output('/tmp/shadow-venv/bin/python -c "%s"' % probe).startswith("None /usr/lib/python3")
    # The same module loaded by the .pth does run in that venv.
    host.run_expect([0], "mv %s/sitecustomize.py %s/inferops_runtime_env.py && echo 'import inferops_runtime_env' > %s/x.pth" % (site, site, site))
    assert host.check_output('/tmp/shadow-venv/bin/python -c "%s"' % probe).startswith("Ring /usr/lib/python3")
    host.run_expect([0], "rm -rf /tmp/shadow-venv")


def test_spec_is_valid_json_with_sorted_keys(host):
    text = host.file(SPEC).content_string
    assert json.loads(text)["vars"] == dict(sorted(json.loads(text)["vars"].items()))
