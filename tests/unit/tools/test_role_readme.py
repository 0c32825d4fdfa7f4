"""tools/role_readme.py: the role READMEs' variables sections, generated from meta/argument_specs.yml."""

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import role_readme  # noqa: E402

SPEC = """---
argument_specs:
  main:
    short_description: Do the thing
    options: &opts
      demo_path:
        description:
          - Where it goes, an absolute path such as C(/opt/demo).
          - Refused when O(demo_mode=off).
        type: path
        default: /opt/demo
      demo_mode:
        description: V(on) or V(off).
        type: str
        choices: ["on", "off"]
        default: "on"
      demo_list:
        description: Items.
        type: list
        elements: str
      demo_proxy:
        description: A proxy.
        type: dict
        no_log: true
        options:
          https_proxy:
            description: For C(https://) URLs.
            type: str
  validate:
    short_description: Check only
    options: *opts
  restore:
    short_description: Put it back
    options:
      demo_revision:
        description: The revision.
        type: str
        required: true
"""

DEFAULTS = """---
demo_path: /opt/demo
demo_list: [a, "b, c"]
"""


def make_role(roles_dir, name="demo", spec=SPEC, readme="# inferops.gpu.demo\n\nDoes the thing.\n"):
    role = roles_dir / name
    (role / "meta").mkdir(parents=True)
    (role / "defaults").mkdir()
    (role / "meta" / "argument_specs.yml").write_text(spec)
    (role / "defaults" / "main.yml").write_text(DEFAULTS)
    if readme is not None:
        (role / "README.md").write_text(readme)
    return role


def run(roles_dir, mode, capsys):
    rc = role_readme.main([mode, "--roles-dir", str(roles_dir)])
    out = capsys.readouterr()
    return rc, out.out + out.err


def rows(readme_text):
    """Option name -> its table row, inside the generated section only."""
    section = readme_text.split(role_readme.BEGIN, 1)[1].split(role_readme.END, 1)[0]
    found = {}
    for line in section.splitlines():
        match = re.match(r"\| `([^`]+)` \|", line)
        if match:
            found.setdefault(match.group(1), line)
    return found


def options_of(spec_path, entry="main"):
    with open(spec_path, encoding="utf-8") as handle:
        spec = yaml.safe_load(handle)["argument_specs"][entry]
    names = []

    def walk(options, prefix=""):
        for name, option in (options or {}).items():
            names.append(prefix + name)
            walk(option.get("options") or option.get("suboptions"), prefix + name + ".")

    walk(spec.get("options"))
    return names


@pytest.mark.parametrize("markup, markdown", [
    ("C(/usr/local/cuda)", "`/usr/local/cuda`"),
    ("V(true) and O(demo_mode=off)", "`true` and `demo_mode=off`"),
    ("the O(inferops.gpu.cuda_toolkit_wheels#module:layout) option", "the `layout` option"),
    ("M(inferops.gpu.gpu_info)", "`inferops.gpu.gpu_info`"),
    ("I(not) B(ever)", "*not* **ever**"),
    ("L(the notes, https://example.invalid/notes) and U(https://example.invalid)",
     "[the notes](https://example.invalid/notes) and [https://example.invalid](https://example.invalid)"),
    ("C(a|b) or x | y", "`a\\|b` or x \\| y"),
    ("releases/<hash> and C(<root>/cuda)", "releases/\\<hash> and `<root>/cuda`"),
    ("V(a\\)b)", "`a)b`"),
    ("Two\n  lines", "Two lines"),
    ("CUDA (the toolkit), NCCL, VRAM", "CUDA (the toolkit), NCCL, VRAM"),
])
def test_markup_becomes_markdown(markup, markdown):
    assert role_readme.convert_markup(markup) == markdown


def test_defaults_are_shown_as_yaml_would_read_them_back():
    assert role_readme.value_text("13.0") == '"13.0"'
    assert role_readme.value_text("yes") == '"yes"'
    assert role_readme.value_text("") == '""'
    assert role_readme.value_text("/opt/ml-env") == "/opt/ml-env"
    assert role_readme.value_text([True, 3, "sm_90"]) == "[true, 3, sm_90]"
    assert role_readme.value_text({"12": "525.60.13"}) == '{"12": 525.60.13}'


def test_a_table_row_per_option_with_type_default_required_and_description(tmp_path):
    role = make_role(tmp_path)
    section = role_readme.render(str(role))
    table = rows(section)
    assert list(table) == ["demo_path", "demo_mode", "demo_list", "demo_proxy", "demo_proxy.https_proxy", "demo_revision"]
    assert table["demo_path"] == ("| `demo_path` | path | `/opt/demo` | no | Where it goes, an absolute path such as `/opt/demo`."
                                  " Refused when `demo_mode=off`. |")
    assert '| `"on"` | no | `on` or `off`. Choices: `"on"`, `"off"`. |' in table["demo_mode"]
    # No default in the spec: the one of defaults/main.yml.
    assert '| list of str | `[a, "b, c"]` | no |' in table["demo_list"]
    assert "Never logged" in table["demo_proxy"]
    assert table["demo_revision"].startswith("| `demo_revision` | str | \u2014 | yes |")
    # validate has main's options; restore options of its own, in a sub-section.
    assert "The entry point `validate` takes the same options as `main`." in section
    assert "### Entry point `restore`" in section and "### Entry point `validate`" not in section
    assert role_readme.render(str(role)) == section


def test_an_option_added_to_a_spec_fails_the_check_until_the_readme_is_written(tmp_path, capsys):
    roles_dir = tmp_path / "roles"
    role = make_role(roles_dir)
    make_role(roles_dir, name="other")
    assert run(roles_dir, "--write", capsys)[0] == 0
    assert run(roles_dir, "--check", capsys) == (0, "")

    spec = role / "meta" / "argument_specs.yml"
    spec.write_text(SPEC.replace("      demo_list:\n", "      demo_added:\n        description: New.\n        type: int\n"
                                 "        default: 3\n      demo_list:\n"))
    rc, out = run(roles_dir, "--check", capsys)
    assert rc == 1
    assert "roles/demo/README.md is not what roles/demo/meta/argument_specs.yml generates" in out
    assert "roles/other" not in out
    assert "run `python tools/role_readme.py --write`" in out
    assert "demo_added" not in (role / "README.md").read_text()  # --check writes nothing

    assert run(roles_dir, "--write", capsys)[0] == 0
    assert run(roles_dir, "--check", capsys) == (0, "")
    assert rows((role / "README.md").read_text())["demo_added"] == "| `demo_added` | int | `3` | no | New. |"


def test_write_replaces_only_the_section_and_keeps_the_prose_around_it(tmp_path, capsys):
    roles_dir = tmp_path / "roles"
    readme = ("# inferops.gpu.demo\n\nDoes the thing.\n\n%s\nstale table\n%s\n\nHand-written notes.\n"
              % (role_readme.BEGIN, role_readme.END))
    role = make_role(roles_dir, readme=readme)
    assert run(roles_dir, "--check", capsys)[0] == 1
    run(roles_dir, "--write", capsys)
    text = (role / "README.md").read_text()
    assert text.startswith("# inferops.gpu.demo\n\nDoes the thing.\n\n" + role_readme.BEGIN + "\n## Variables\n")
    assert text.endswith(role_readme.END + "\n\nHand-written notes.\n")
    assert "stale table" not in text and text.count(role_readme.BEGIN) == 1


def test_a_readme_without_the_markers_gets_the_section_at_its_end(tmp_path, capsys):
    roles_dir = tmp_path / "roles"
    role = make_role(roles_dir)
    assert run(roles_dir, "--check", capsys)[0] == 1
    run(roles_dir, "--write", capsys)
    text = (role / "README.md").read_text()
    assert text.startswith("# inferops.gpu.demo\n\nDoes the thing.\n\n" + role_readme.BEGIN)
    assert run(roles_dir, "--check", capsys) == (0, "")


def test_a_role_without_an_argument_spec_is_skipped(tmp_path, capsys):
    roles_dir = tmp_path / "roles"
    (roles_dir / "node" / "tasks").mkdir(parents=True)
    (roles_dir / "node" / "tasks" / "main.yml").write_text("---\n[]\n")
    make_role(roles_dir)
    run(roles_dir, "--write", capsys)
    assert run(roles_dir, "--check", capsys) == (0, "")
    assert not (roles_dir / "node" / "README.md").exists()


def test_the_command_line_exits_1_naming_the_role(tmp_path):
    roles_dir = tmp_path / "roles"
    make_role(roles_dir)
    done = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "role_readme.py"), "--check", "--roles-dir", str(roles_dir)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "roles/demo/README.md" in done.stderr


def test_a_real_roles_copy_passes_the_check_and_fails_once_its_spec_changes(tmp_path, capsys):
    roles_dir = tmp_path / "roles"
    shutil.copytree(os.path.join(ROOT, "roles", "sglang_server"), roles_dir / "sglang_server")
    run(roles_dir, "--write", capsys)
    assert run(roles_dir, "--check", capsys) == (0, "")
    spec = roles_dir / "sglang_server" / "meta" / "argument_specs.yml"
    spec.write_text(spec.read_text().replace("    options: &sglang_server_options\n",
                                             "    options: &sglang_server_options\n      sglang_server_new_option:\n"
                                             "        description: New.\n        type: str\n", 1))
    rc, out = run(roles_dir, "--check", capsys)
    assert rc == 1 and "roles/sglang_server/README.md" in out


@pytest.mark.parametrize("role", [name for name, _path in role_readme.roles(os.path.join(ROOT, "roles"))])
def test_every_option_of_a_real_role_is_in_its_readme_table(role):
    with open(os.path.join(ROOT, "roles", role, "README.md"), encoding="utf-8") as handle:
        table = rows(handle.read())
    wanted = options_of(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"))
    assert wanted and [name for name in wanted if name not in table] == []
    if role == "sglang_server":
        assert len(wanted) >= 50
