"""tools/sglang_contract.py on tiny synthetic wheels (zip files made here: no network, no sglang).

Release 1.0 registers its options with add_argument calls (as sglang 0.5.9 does), release 2.0 from
annotated namespace fields (as 0.5.23 does, through add_cli_args_from_dataclass)."""

import argparse
import collections
import io
import os
import sys
import tempfile
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import sglang_contract  # noqa: E402

REGISTRY = '''
import re
SUPPORTED = ("1.0", "2.0")
READY = "Server ready!"
ROLE_ARGS = ("--model-path", "--port")
DEFAULT_ARGS = {"1.0": ("--tp", "8", "--max-bs", "4"), "2.0": ("--tp", "8", "--max-bs-decode", "4")}
REMOVED_ARGS = (("--max-bs", "2.0", "--max-bs-decode (and --max-bs-prefill)"),)
EVIDENCE = {
    # 2.0 has no fragment of its own: it is held to 1.0's.
    "ready line": {"1.0": (("srt/entrypoints/http_server.py", READY),)},
    "running gauge": {"1.0": (("srt/metrics/collector.py", 'name="x:running"'),),
                      "2.0": (("srt/observability/collector.py", 'name="x:running"'),)},
    "rank death": {"2.0": (("srt/entrypoints/engine.py", "scheduler died"),)},
}


def parse(version):
    return tuple(int(part) for part in re.match(r"[0-9]+(?:[.][0-9]+)*", version).group(0).split("."))
'''

HTTP = 'app.get("/health")\nlogger.info("Server ready!")\n'
LAUNCH = 'if __name__ == "__main__":\n    server_args = prepare_server_args(sys.argv[1:])\n'
SERVER_ARGS_1 = '''
import argparse


class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", "--model", type=str)
        parser.add_argument("--port", type=int)
        parser.add_argument("--tp-size", "--tensor-parallel-size", type=int)
        parser.add_argument("--max-bs", type=int)


def prepare_server_args(argv):
    parser = argparse.ArgumentParser(ABBREV)
    ServerArgs.add_cli_args(parser)
    return parser.parse_args(argv)
'''
SERVER_ARGS_2 = '''
import argparse
from sglang.srt.arg_groups.arg_utils import add_cli_args_from_dataclass
from sglang.srt.arg_groups.fields import collect_input_fields
from sglang.srt.arg_groups.fields.parallel import (
    Parallel,
)
from sglang.srt.arg_groups.fields.serving import Serving


class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--config", type=str)


_INPUT_NAMESPACES = [Parallel, Serving]
_annotations, _defaults, _namespaces = collect_input_fields(_INPUT_NAMESPACES)


def prepare_server_args(argv):
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser.parse_args(argv)
'''
PARALLEL = '''
from typing import Optional

import msgspec

from sglang.srt.arg_groups.arg_utils import A, Arg, Derived


class Parallel(msgspec.Struct):
    _NS_PATH = "parallel"

    tp_size: A[int, Arg(help="The tensor parallelism size.", aliases=["--tensor-parallel-size"])] = 1
    max_bs_decode: A[int, "The largest decode batch captured."] = 0
    prefill_bs_cap: A[Optional[int], Arg(help="Prefill.", cli_name="--max-bs-prefill")] = None
    hidden: A[int, Arg(help="Set by resolution only.", no_cli=True)] = 0
    derived: A[int, Derived(doc="Computed.")] = 0
    plain: int = 0
'''
SERVING = '''
import msgspec

from sglang.srt.arg_groups.arg_utils import A, Arg


class Serving(msgspec.Struct):
    _NS_PATH = "serving"

    model_path: A[str, Arg(help="The model.", aliases=["--model"])]
    port: A[int, "The port " "of the HTTP server."] = 30000
'''


def release_1(abbrev=''):
    return {
        'launch_server.py': LAUNCH,
        'srt/entrypoints/http_server.py': HTTP,
        'srt/metrics/collector.py': 'Gauge(name="x:running")\n',
        'srt/server_args.py': SERVER_ARGS_1.replace('ABBREV', abbrev),
    }


def release_2():
    return {
        'launch_server.py': LAUNCH,
        'srt/entrypoints/http_server.py': HTTP,
        'srt/entrypoints/engine.py': 'raise RuntimeError(f"Rank {rank} scheduler died")\n',
        'srt/observability/collector.py': 'Gauge(name="x:running")\n',
        'srt/server_args.py': SERVER_ARGS_2,
        'srt/arg_groups/fields/__init__.py': '',
        'srt/arg_groups/fields/parallel.py': PARALLEL,
        'srt/arg_groups/fields/serving.py': SERVING,
    }


def wheel(directory, version, files):
    directory.mkdir(exist_ok=True)
    path = directory / ('sglang-%s-py3-none-any.whl' % version)
    with zipfile.ZipFile(path, 'w') as archive:
        for name, text in files.items():
            archive.writestr('sglang/' + name, text)
        archive.writestr('sglang-%s.dist-info/METADATA' % version, 'Name: sglang\nVersion: %s\n' % version)
    return str(path)


@pytest.fixture(name='registry_path')
def fixture_registry_path(tmp_path):
    path = tmp_path / 'sglang_versions.py'
    path.write_text(REGISTRY)
    return str(path)


@pytest.fixture(name='registry')
def fixture_registry(registry_path):
    return sglang_contract.load_registry(registry_path)


Run = collections.namedtuple('Run', 'rc lines failed')


def run_check(registry, *wheels, lock=None):
    """check()'s exit code, its lines and its FAILED lines."""
    out = io.StringIO()
    rc = sglang_contract.check(list(wheels), registry, lock, out=out)
    lines = out.getvalue().splitlines()
    return Run(rc, lines, [line for line in lines if line.startswith('FAILED')])


def test_all_entries_present_pass(tmp_path, registry):
    rc, lines, failed = run_check(registry, wheel(tmp_path, '1.0', release_1()), wheel(tmp_path, '2.0', release_2()))
    assert (rc, failed) == (0, []), lines
    assert lines[0].startswith('sglang 1.0 (sglang-1.0-py3-none-any.whl): 2 entries, 2 fragments in 2 files; not in this release: rank death;')
    assert 'no removed option applies' in lines[0]
    assert lines[1].startswith("sglang 2.0 (sglang-2.0-py3-none-any.whl): 3 entries, 3 fragments in 3 files"
                               " (1 of them with an older release's fragments);")
    assert '4 of 4 rendered arguments accepted' in lines[1]
    assert '1 removed options refused (--max-bs ambiguous), their 2 replacements present' in lines[1]


def test_a_changed_fragment_fails_naming_the_entry(tmp_path, registry):
    files = release_2()
    files['srt/entrypoints/http_server.py'] = HTTP.replace('Server ready!', 'Server is ready.')
    rc, lines, failed = run_check(registry, wheel(tmp_path, '2.0', files))
    assert rc == 1
    assert failed == ["FAILED sglang 2.0: entry 'ready line': srt/entrypoints/http_server.py no longer has 'Server ready!'"], lines


def test_a_missing_file_fails_naming_the_entry(tmp_path, registry):
    files = release_2()
    del files['srt/observability/collector.py']
    rc, _lines, failed = run_check(registry, wheel(tmp_path, '2.0', files))
    assert rc == 1
    assert failed == ["FAILED sglang 2.0: entry 'running gauge': srt/observability/collector.py is not in the wheel"
                      " (fragment 'name=\"x:running\"')"]


def test_a_renamed_argument_fails(tmp_path, registry):
    files = release_1()
    files['srt/server_args.py'] = files['srt/server_args.py'].replace('"--port"', '"--server-port"')
    rc, lines, failed = run_check(registry, wheel(tmp_path, '1.0', files))
    assert rc == 1
    assert failed == ['FAILED sglang 1.0: argument --port (ROLE_ARGS): no such option, nor a prefix of one']
    assert '3 of 4 rendered arguments accepted' in lines[0]


def test_an_ambiguous_prefix_fails_as_ambiguous(tmp_path, registry):
    # The role rendering 1.0's --max-bs for release 2.0, which has -decode and -prefill.
    registry.DEFAULT_ARGS = dict(registry.DEFAULT_ARGS, **{'2.0': ('--tp', '8', '--max-bs', '4')})
    rc, _lines, failed = run_check(registry, wheel(tmp_path, '2.0', release_2()))
    assert rc == 1
    assert failed == ['FAILED sglang 2.0: argument --max-bs (DEFAULT_ARGS): ambiguous: a prefix of --max-bs-decode, --max-bs-prefill']


def test_a_unique_prefix_passes(tmp_path, registry):
    rc, lines, _failed = run_check(registry, wheel(tmp_path, '1.0', release_1()))
    assert rc == 0
    assert '(--tp is a unique prefix of --tp-size)' in lines[0]
    assert 'abbreviations on' in lines[0]


def test_a_prefix_fails_when_abbreviations_are_off(tmp_path, registry):
    rc, _lines, failed = run_check(registry, wheel(tmp_path, '1.0', release_1(abbrev='allow_abbrev=False')))
    assert rc == 1
    assert failed == ['FAILED sglang 1.0: argument --tp (DEFAULT_ARGS): no such option (abbreviations are off)']


def test_a_removed_option_still_accepted_fails(tmp_path, registry):
    files = release_2()
    files['srt/server_args.py'] = files['srt/server_args.py'].replace('"--config"', '"--config", "--max-bs"')
    rc, _lines, failed = run_check(registry, wheel(tmp_path, '2.0', files))
    assert rc == 1
    assert failed == ['FAILED sglang 2.0: argument --max-bs (REMOVED_ARGS, gone since 2.0): still accepted (exact)']


def test_a_missing_replacement_fails(tmp_path, registry):
    files = release_2()
    files['srt/arg_groups/fields/parallel.py'] = PARALLEL.replace('cli_name="--max-bs-prefill"', 'cli_name="--prefill-max-bs"')
    rc, _lines, failed = run_check(registry, wheel(tmp_path, '2.0', files))
    assert rc == 1
    # With -prefill gone, --max-bs is a unique prefix again: accepted, for the wrong option.
    assert failed == ['FAILED sglang 2.0: argument --max-bs (REMOVED_ARGS, gone since 2.0): still accepted (a unique prefix of --max-bs-decode)',
                      'FAILED sglang 2.0: argument --max-bs (REMOVED_ARGS): replacement --max-bs-prefill: no such option, nor a prefix of one']


def read_parser(path):
    with sglang_contract.Wheel(path) as release:
        return sglang_contract.read_parser(release)


def test_dataclass_fields_are_read_as_add_cli_args_from_dataclass_registers_them(tmp_path):
    parser = read_parser(wheel(tmp_path, '2.0', release_2()))
    # tp_size and its alias, a bare help string, cli_name over the field's name, the manual
    # --config and argparse's help; no_cli, Derived-only and plain fields are no options.
    assert parser.options == {'--tp-size', '--tensor-parallel-size', '--max-bs-decode', '--max-bs-prefill', '--model-path',
                              '--model', '--port', '--config', '-h', '--help'}
    assert (parser.fields, parser.registrations, parser.allow_abbrev) == (5, 7, True)


def test_verdicts_agree_with_argparse(tmp_path, capsys):
    parser = read_parser(wheel(tmp_path, '2.0', release_2()))
    real = argparse.ArgumentParser(add_help=False)
    for option in sorted(parser.options):
        real.add_argument(option)
    for arg in ('--tp', '--max-bs', '--max-bs-d', '--tensor', '--mod', '--model', '--nope', '--port=1'):
        try:
            real.parse_args([arg] if '=' in arg else [arg, '1'])
            actual = 'accepted'
        except SystemExit:
            actual = 'ambiguous' if 'ambiguous option' in capsys.readouterr().err else 'unknown'
        assert parser.verdict(arg)[0] == actual, arg


def test_an_unreadable_registration_fails_loudly(tmp_path, registry):
    files = release_1()
    files['srt/server_args.py'] = files['srt/server_args.py'].replace(
        'parser.add_argument("--max-bs", type=int)', 'parser.add_argument(*MORE)\n        _more_args(parser)')
    rc, _lines, failed = run_check(registry, wheel(tmp_path, '1.0', files))
    assert rc == 1
    assert failed == ['FAILED sglang 1.0: argparse: cannot read srt/server_args.py statically: line 11: add_argument(*...)']


def test_a_launcher_with_another_parser_fails_loudly(tmp_path, registry):
    files = release_1()
    files['launch_server.py'] = 'server_args = ServerArgs.from_cli(sys.argv[1:])\n'
    rc, _lines, failed = run_check(registry, wheel(tmp_path, '1.0', files))
    assert rc == 1
    assert failed == ['FAILED sglang 1.0: argparse: cannot read srt/server_args.py statically: launch_server.py does not call'
                      ' prepare_server_args(sys.argv[1:])']


def test_every_supported_version_is_pinned_and_given(tmp_path, registry):
    lock = tmp_path / 'wheels.lock'
    lock.write_text('sglang==1.0 --hash=sha256:%s\nsglang==0.9 --hash=sha256:%s\n' % ('a' * 64, 'b' * 64))
    rc, _lines, failed = run_check(registry, wheel(tmp_path, '1.0', release_1()), lock=str(lock))
    assert rc == 1
    assert failed == ['FAILED sglang 2.0: in SUPPORTED but not pinned in %s' % os.path.relpath(str(lock), ROOT),
                      'FAILED sglang 2.0: in SUPPORTED but no wheel of it was given',
                      'FAILED sglang 0.9: pinned in %s but not in SUPPORTED' % os.path.relpath(str(lock), ROOT)]


def test_the_self_test_proves_a_broken_copy_fails(tmp_path, registry_path, monkeypatch):
    wheels = [wheel(tmp_path / 'one', '1.0', release_1()), wheel(tmp_path / 'two', '2.0', release_2())]
    scratch = tmp_path / 'scratch'
    scratch.mkdir()
    monkeypatch.setattr(tempfile, 'tempdir', str(scratch))
    out = io.StringIO()
    assert sglang_contract.self_test(wheels, registry_path, out=out) == 0, out.getvalue()
    assert "  |FAILED sglang 1.0: entry 'ready line': srt/entrypoints/http_server.py no longer has 'Server ready!'" in out.getvalue()
    assert "self-test: passed (the checker fails naming 'ready line', and only it)" in out.getvalue()
    assert not os.listdir(str(scratch))  # the broken copy is gone


def test_the_self_test_fails_unless_the_broken_entry_alone_fails(tmp_path, registry_path):
    files = release_1()
    del files['srt/metrics/collector.py']  # a second entry failing as well
    out = io.StringIO()
    assert sglang_contract.self_test([wheel(tmp_path, '1.0', files)], registry_path, out=out) == 1
    assert "FAILED self-test: the checker must exit 1 naming 'ready line' and nothing else" in out.getvalue()


def test_the_self_test_fails_when_the_copy_still_passes(tmp_path, registry_path):
    # A ready line with no letters cannot be reworded by case: the copy passes, and that is a failure.
    with open(registry_path, 'a') as handle:
        handle.write('EVIDENCE["ready line"] = {"1.0": (("srt/entrypoints/http_server.py", "!!!"),)}\n')
    files = release_1()
    files['srt/entrypoints/http_server.py'] = HTTP + 'print("!!!")\n'
    out = io.StringIO()
    assert sglang_contract.self_test([wheel(tmp_path, '1.0', files)], registry_path, out=out) == 1
    assert ') exited 0:' in out.getvalue()


def test_the_real_registry_is_pinned_and_has_default_args():
    registry = sglang_contract.load_registry()
    pins = sglang_contract.read_lock(os.path.join(ROOT, 'tools', 'sglang-wheels.lock'))
    assert sorted(pins) == sorted(registry.SUPPORTED)
    assert all(version in registry.DEFAULT_ARGS for version in registry.SUPPORTED)
