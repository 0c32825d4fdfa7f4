"""The state side_effect leaves: A current after rollback, B previous, both verified releases."""

import json

import pytest

testinfra_hosts = ["ansible://blackwell"]
ROOT = "/opt/ml-env.d"


def release(host, link):
    return host.file(link).linked_to


@pytest.fixture
def a(host):
    return host.file("/var/lib/inferops-mlenv-release-a").content_string.strip()


@pytest.fixture
def b(host):
    return release(host, ROOT + "/previous")


def test_a_is_current_b_previous_and_nothing_else_is_kept(host, a, b):
    assert host.file("/opt/ml-env").is_symlink
    assert release(host, "/opt/ml-env") == a
    assert a != b
    assert sorted(host.check_output("ls -1 %s/releases" % ROOT).split()) == sorted([a.rsplit("/", 1)[1], b.rsplit("/", 1)[1]])


@pytest.mark.parametrize("which", ["a", "b"])
def test_each_release_is_marked_verified_with_its_hash(host, which, request):
    path = request.getfixturevalue(which)
    marker = host.file(path + "/.verified")
    assert marker.user == "root" and marker.mode == 0o644
    assert marker.content_string.strip() == path.rsplit("/", 1)[1]


@pytest.mark.parametrize("which", ["a", "b"])
def test_verification_read_the_compiled_extension_and_passed(host, which, request):
    report = json.loads(host.file(request.getfixturevalue(which) + "/.ml_env/verify.json").content_string)
    assert report["problems"] == []
    # The ABI check really ran: markupsafe's C extension was read (it imports nothing from torch).
    assert any("markupsafe/_speedups" in path for path in report["abi"]["checked"]), report["abi"]
    assert report["abi"]["missing"] == []
    assert {item["name"]: item["ok"] for item in report["imports"]} == {
        "packaging": True, "six": True, "idna": True, "markupsafe": True, "sglang": True}


def test_current_venv_imports_the_pins_of_a(host):
    out = host.check_output(
        "/opt/ml-env/bin/python -c 'import idna, packaging, sglang, six; "
        "print(packaging.__version__, idna.__version__, sglang.__version__, six.__version__)'")
    # idna 3.10 although the stand-in sglang pins idna==3.7: the profile's pins win.
    assert out.split() == ["24.1", "3.10", "0.5.9", "1.17.0"]


def test_b_holds_the_moved_pin(host, b):
    lock = host.file(b + "/.ml_env/requirements.lock").content_string.split()
    assert "packaging==24.2" in lock and "idna==3.10" in lock


@pytest.mark.parametrize("which", ["a", "b"])
def test_site_files_are_in_every_release(host, which, request):
    release = request.getfixturevalue(which)
    purelib = host.check_output(release + "/bin/python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'")
    hook = host.file(purelib + "/_inferops_probe.pth")
    assert hook.user == "root" and hook.mode == 0o644
    assert "INFEROPS_PROBE" in hook.content_string


def test_the_start_up_file_runs_in_the_current_release(host):
    assert host.check_output("/opt/ml-env/bin/python -c 'import os; print(os.environ[\"INFEROPS_PROBE\"])'") == "release-hook"


def test_the_pinned_uv_built_the_releases(host):
    assert host.check_output(ROOT + "/tools/uv-0.13.9/bin/uv --version").split()[:2] == ["uv", "0.13.9"]


def test_binutils_is_there_for_the_abi_check(host):
    assert host.exists("nm") and host.exists("c++filt")


@pytest.mark.parametrize("which", ["a", "b"])
def test_system_site_packages_false_as_a_string_stays_false(host, which, request):
    # Release A was built with ml_env_system_site_packages: "false" (a string).
    assert "include-system-site-packages = false" in host.file(request.getfixturevalue(which) + "/pyvenv.cfg").content_string


@pytest.mark.parametrize("which", ["a", "b"])
def test_the_release_name_covers_what_verification_checked(host, which, request):
    pins = json.loads(host.file(request.getfixturevalue(which) + "/.ml_env/pins.json").content_string)
    checked = pins["verification"]
    assert {"name": "idna", "version": "3.10"} in checked["imports"]
    assert checked["cuda_major"] == "13" and checked["abi_check"] is True and checked["require_gpu"] is False
