"""Scope system (inferops-rtenv-2, NCCL profile auto through gpu_info: no GPU, profile none):
/usr/bin/python3 gets the spec too, and the distro's own sitecustomize (apport) is untouched."""

from conftest import CUDA_BIN, ENV_FILE, PROFILE, SYS_PY, VENV_PY, python_env, renderings_env, site_dir

testinfra_hosts = ["ansible://inferops-rtenv-2"]


def test_no_gpu_means_no_nccl_overrides(spec):
    assert not [k for k in spec["vars"] if k.startswith("NCCL_")]
    assert spec["vars"]["CUDA_HOME"] == "/usr/local/cuda-13.0"


def test_no_gpu_means_no_per_architecture_variables(spec):
    # gpu_info ran (runtime_env_compute_capability empty) and found no GPU.
    assert "FLASHINFER_CUDA_ARCH_LIST" not in spec["vars"] and "SGLANG_ENABLE_JIT_DEEPGEMM" not in spec["vars"]
    assert spec["vars"]["TRITON_PTXAS_BLACKWELL_PATH"] == spec["vars"]["TRITON_PTXAS_PATH"]


def test_sglang_switch_given_as_the_string_false_is_in_no_rendering(host, spec):
    # "false" from -e or an inventory is a string; off means the variable is left out everywhere.
    assert host.ansible.get_variables()["runtime_env_sglang_disable_cudnn_check"] == "false"
    assert "SGLANG_DISABLE_CUDNN_CHECK" not in spec["vars"]
    for path in (PROFILE, ENV_FILE):
        assert "SGLANG_DISABLE_CUDNN_CHECK" not in host.file(path).content_string, path
    for rendering, env in renderings_env(host, SYS_PY).items():
        assert "SGLANG_DISABLE_CUDNN_CHECK" not in env, rendering
        assert env["CUDA_HOME"] == "/usr/local/cuda-13.0", rendering


def test_system_and_venv_python_see_the_spec(host, spec):
    for python in (SYS_PY, VENV_PY):
        env = python_env(host, python)
        assert {k: env.get(k) for k in spec["vars"]} == spec["vars"], python
        assert env["PATH"].split(":")[0] == CUDA_BIN
    assert python_env(host, SYS_PY, prefix="CUDA_HOME=/opt/other ")["CUDA_HOME"] == "/opt/other"


def test_hook_is_in_the_system_site_directory(host):
    system_site = site_dir(host, SYS_PY, "site.getsitepackages()[0]")
    assert system_site.startswith("/usr/local/lib/python3")
    for name in ("inferops_runtime_env.pth", "inferops_runtime_env.py"):
        f = host.file(system_site + "/" + name)
        assert (f.is_file, f.user, f.group, f.mode) == (True, "root", "root", 0o644)


def test_distro_sitecustomize_is_untouched_and_still_imported(host):
    host.run_expect([0], "sha256sum --check --quiet /root/distro-sitecustomize.sha256")
    distro = host.check_output(SYS_PY + " -c 'import sitecustomize; print(sitecustomize.__file__)'")
    assert distro.startswith("/usr/lib/python3") and distro.endswith("/sitecustomize.py")
    assert host.file(distro).is_symlink and host.file(distro).linked_to.startswith("/etc/python3")


def test_distro_hook_and_runtime_env_hook_both_run(host):
    # The distro sitecustomize installs apport's hook when apport_python_hook imports; a stand-in
    # module proves that hook still runs in the same interpreter that gets the spec.
    fake = "def install():\\n    print(\"apport hook installed\")\\n"
    host.run_expect([0], "mkdir -p /tmp/fake-apport && printf '%s' > /tmp/fake-apport/apport_python_hook.py" % fake)
    out = host.check_output("PYTHONPATH=/tmp/fake-apport %s -c 'import os; print(os.environ[\"CUDA_HOME\"])'" % SYS_PY)
    assert out.splitlines() == ["apport hook installed", "/usr/local/cuda-13.0"]
