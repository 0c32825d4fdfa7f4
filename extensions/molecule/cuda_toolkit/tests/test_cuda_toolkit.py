"""CUDA 12.8 and 13.0 side by side from NVIDIA's wheels: trees, ldconfig, versions, cubins for sm_120."""

import json
import os
import struct

import pytest

testinfra_hosts = ["ansible://cuda"]

REPORTS = "/var/lib/inferops-molecule/cuda_toolkit"
HOMES = {"12.8": "/usr/local/cuda-12.8", "13.0": "/usr/local/cuda-13.0"}
PTX = """.version 8.0
.target sm_75
.address_size 64
.visible .entry probe(.param .u64 out)
{
\t.reg .b64 %rd<3>;
\t.reg .b32 %r<2>;
\tld.param.u64 %rd1, [out];
\tcvta.to.global.u64 %rd2, %rd1;
\tmov.u32 %r1, %tid.x;
\tst.global.u32 [%rd2], %r1;
\tret;
}
"""
CU = 'extern "C" __global__ void probe(int *out) { out[threadIdx.x] = threadIdx.x * 2; }\n'


def cubin_sm(host, path):
    """Target architecture from a cubin's ELF header (e_machine 190 = CUDA; e_flags layout by ABI version)."""
    data = host.file(path).content
    assert data[:4] == b"\x7fELF", path
    assert struct.unpack_from("<H", data, 18)[0] == 190, "not a CUDA ELF: %s" % path
    flags = struct.unpack_from("<I", data, 48)[0]
    return (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF


def release(out):
    return out.split("release ")[1].split(",")[0]


@pytest.mark.parametrize("version,paths", [
    ("12.8", ["bin/ptxas", "include/cuda_runtime.h", "include/crt/host_defines.h", "include/thrust",
              "nvvm/libdevice/libdevice.10.bc", "lib64/libcudart.so.12", "lib64/libcudart.so"]),
    ("13.0", ["bin/nvcc", "bin/ptxas", "bin/nvcc.profile", "bin/cudafe++", "bin/fatbinary", "nvvm/bin/cicc",
              "nvvm/libdevice/libdevice.10.bc", "include/cuda_runtime.h", "include/crt/host_defines.h",
              "include/cccl", "lib64/libcudart.so.13", "lib64/libcudart.so"]),
])
def test_both_toolkit_trees_are_complete(host, version, paths):
    home = HOMES[version]
    for rel in paths:
        assert host.file(os.path.join(home, rel)).exists, "%s/%s missing" % (home, rel)
    stamp = json.loads(host.file(home + "/.inferops-wheels.json").content_string)
    assert stamp["cuda_version"] == version
    assert all(pin.split("==")[1].startswith(version + ".") for pin in stamp["wheels"]), stamp


def test_cuda12_wheels_have_no_nvcc(host):
    # nvidia-cuda-nvcc-cu12 ships ptxas but no nvcc: the role must not pretend otherwise.
    assert not host.file("/usr/local/cuda-12.8/bin/nvcc").exists
    facts = json.loads(host.file(REPORTS + "/facts-12.8.json").content_string)
    assert facts["cuda_toolkit_nvcc"] == ""
    assert facts["compile_mode"] == "ptxas"


@pytest.mark.parametrize("version", ["12.8", "13.0"])
def test_facts_handed_forward(host, version):
    facts = json.loads(host.file(REPORTS + "/facts-%s.json" % version).content_string)
    assert facts["cuda_toolkit_home"] == HOMES[version]
    assert facts["cuda_toolkit_ptxas"] == HOMES[version] + "/bin/ptxas"
    assert facts["cuda_toolkit_version_installed"].startswith(version + ".")
    assert "sm_120:ptxas" in facts["cubins"]
    if version == "13.0":
        assert facts["cuda_toolkit_nvcc"] == HOMES[version] + "/bin/nvcc"
        assert facts["compile_mode"] == "nvcc"
        assert "sm_120:nvcc" in facts["cubins"]


@pytest.mark.parametrize("version,major", [("12.8", "12"), ("13.0", "13")])
def test_owned_ldconfig_file(host, version, major):
    name = "inferops-cuda-%s.conf" % version.replace(".", "-")
    conf = host.file("/etc/ld.so.conf.d/50-" + name)
    # One file per toolkit: the role removes its file under any other order.
    assert [entry for entry in host.check_output("ls /etc/ld.so.conf.d").split() if entry.endswith("-" + name)] == [
        "50-" + name]
    assert conf.exists and conf.user == "root" and conf.mode == 0o644
    lines = [line for line in conf.content_string.splitlines() if line and not line.startswith("#")]
    assert lines == [HOMES[version] + "/lib64"]
    assert "Ansible managed" in conf.content_string


@pytest.mark.parametrize("version,major", [("12.8", "12"), ("13.0", "13")])
def test_ldconfig_resolves_libcudart_into_its_toolkit(host, version, major):
    soname = "libcudart.so.%s" % major
    lines = [line for line in host.check_output("ldconfig -p").splitlines() if line.strip().startswith(soname + " ")]
    assert lines, "%s is not in the loader cache" % soname
    path = lines[0].split("=>")[1].strip()
    real = host.check_output("readlink -f %s", path)
    assert real.startswith(HOMES[version] + "/"), (path, real)


def test_nvcc_and_ptxas_report_their_versions(host):
    assert release(host.check_output("/usr/local/cuda-13.0/bin/nvcc --version")) == "13.0"
    assert release(host.check_output("/usr/local/cuda-13.0/bin/ptxas --version")) == "13.0"
    assert release(host.check_output("/usr/local/cuda-12.8/bin/ptxas --version")) == "12.8"


@pytest.mark.parametrize("version", ["12.8", "13.0"])
def test_ptxas_builds_an_sm_120_cubin(host, version):
    work = host.check_output("mktemp -d")
    host.run_expect([0], "printf '%%s' %s > %s/probe.ptx", PTX, work)
    cmd = host.run("%s/bin/ptxas -arch=sm_120 -o %s/probe.cubin %s/probe.ptx", HOMES[version], work, work)
    assert cmd.rc == 0, cmd.stdout + cmd.stderr
    assert cubin_sm(host, work + "/probe.cubin") == 120
    host.run("rm -rf %s", work)


def test_nvcc_13_compiles_cuda_cpp_to_an_sm_120_cubin(host):
    work = host.check_output("mktemp -d")
    host.run_expect([0], "printf '%%s' %s > %s/probe.cu", CU, work)
    cmd = host.run("cd %s && /usr/local/cuda-13.0/bin/nvcc -cubin -arch=sm_120 -o probe.cubin probe.cu", work)
    assert cmd.rc == 0, cmd.stdout + cmd.stderr
    assert cubin_sm(host, work + "/probe.cubin") == 120
    host.run("rm -rf %s", work)


def test_default_cuda_link_untouched(host):
    assert not host.file("/usr/local/cuda").exists


def side_effect(host):
    return json.loads(host.file(REPORTS + "/side_effect.json").content_string)


def test_booleans_given_as_strings_act_as_their_value(host):
    strings = side_effect(host)["booleans_as_strings"]
    # "false": /usr/local/cuda left alone, no verification.
    assert strings["false"]["default_link_skipped"] is True and strings["false"]["link_exists"] is False
    assert strings["false"]["verify_skipped"] is True and strings["false"]["version_installed"] == ""
    # "true": the link would be made (check mode), and the toolkit was verified.
    assert strings["true"]["default_link_changed"] is True
    assert strings["true"]["default_link_diff"]["after"]["path"] == "/usr/local/cuda"
    assert strings["true"]["verify_ran"] is True and strings["true"]["version_installed"].startswith("13.0.")


def test_ldconfig_runs_without_flushing_other_handlers(host):
    ldconfig = side_effect(host)["ldconfig"]
    # Another role's handler, notified before the role, was still pending when the role finished ...
    assert ldconfig["other_handler_ran_during_role"] is False
    # ... and ran at the end of the play, as handlers do.
    assert host.file(REPORTS + "/other-handler-ran").exists
    # The role rewrote its file, removed the one under an older order, and rebuilt the cache itself.
    assert ldconfig["conf_written"] is True and ldconfig["older_order_removed"] is True and ldconfig["ldconfig_ran"] is True
    assert ldconfig["cudart13_before"] == []
    assert any("=> /usr/local/cuda-13.0/lib64/libcudart.so.13" in line for line in ldconfig["cudart13_after"])
    assert ldconfig["verified_ldconfig"]["libcudart.so.13"] == "/usr/local/cuda-13.0/lib64/libcudart.so.13"
    assert not host.file("/etc/ld.so.conf.d/40-inferops-cuda-13-0.conf").exists


def test_package_method_repository_in_check_mode(host):
    check = side_effect(host)["package_check_mode"]
    if host.system_info.release.split(".")[0] == "13":
        assert 'this host: "debian13"' in check["refused"] and "choose cuda_toolkit_method wheels" in check["refused"]
        assert check["sources_written"] is False and check["repo_changed"] is False
        assert not host.file("/etc/apt/sources.list.d/inferops-cuda-nvidia.sources").exists
        return
    assert check["refused"] == ""
    assert check["repo_changed"] is True
    assert "URIs: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/" in check["repo_after"]
    assert "Signed-By: /etc/apt/keyrings/inferops-cuda-nvidia.asc" in check["repo_after"]
    assert "Suites: /" in check["repo_after"]
    assert check["sources_written"] is False and check["install_skipped"] is True
    assert not host.file("/etc/apt/sources.list.d/inferops-cuda-nvidia.sources").exists
    assert not host.file("/etc/apt/keyrings/inferops-cuda-nvidia.asc").exists
