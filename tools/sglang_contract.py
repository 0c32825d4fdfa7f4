# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The contract step's checker: what the collection relies on in SGLang, read in the real wheels.

    sglang_contract.py check [--lock FILE] [--registry FILE] WHEEL...
    sglang_contract.py self-test [--registry FILE] WHEEL...

`check` reads every wheel (a zip: nothing is imported or run, sglang needs torch) against
plugins/module_utils/sglang/versions.py, the registry:
  1. every EVIDENCE fragment is in its file, for the wheel's version;
  2. every argument the collection renders (ROLE_ARGS, DEFAULT_ARGS[version]) is accepted by that
     version's argparse, read statically with `ast`, abbreviations included; every REMOVED_ARGS
     option that applies is refused and what replaces it exists.
It prints one line per wheel, one `FAILED ...` line per broken entry, and exits 1 on any.
With --lock, every SUPPORTED version must be pinned there and given as a wheel.

`self-test` proves `check` fails on a broken wheel: a copy of a real one with the ready line changed
must fail naming the entry `ready line`, and nothing else.

Python 3.9+, stdlib only: it runs with the tool venv's python before anything else is installed.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REGISTRY = os.path.join(ROOT, 'plugins', 'module_utils', 'sglang', 'versions.py')
PACKAGE = 'sglang'
SERVER_ARGS = 'srt/server_args.py'
# What the role runs (`python -m sglang.launch_server`): the parser read is the one it parses with.
LAUNCH = ('launch_server.py', 'prepare_server_args(sys.argv[1:])')
# The entry the self-test breaks in a copy of a real wheel.
SELF_TEST_ENTRY = 'ready line'
OPTION = re.compile(r'--[A-Za-z0-9][A-Za-z0-9_-]*')
LOCK_LINE = re.compile(r'^sglang==(\S+)\s.*--hash=sha256:([0-9a-f]{64})')


class Unreadable(Exception):
    """The argparse definitions take a form this reader does not know: a new release must not pass
    unread, so this is a failure (update the reader), never a silent skip."""


def load_registry(path=REGISTRY):
    # By path, not through the collection loader: the registry imports nothing but `re`, and this
    # step must not need Ansible.
    spec = importlib.util.spec_from_file_location('sglang_versions', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the wheel ------------------------------------------------------------------------------------

class Wheel:
    """A wheel's files, read straight from the zip (decoded once each)."""

    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)
        self.version = wheel_version(path)
        self._zip = zipfile.ZipFile(path)
        self._names = set(self._zip.namelist())
        self._texts = {}

    def text(self, name):
        """The source of `name` (relative to the package), None when the wheel has no such file."""
        if name not in self._texts:
            member = '%s/%s' % (PACKAGE, name)
            self._texts[name] = self._zip.read(member).decode('utf-8') if member in self._names else None
        return self._texts[name]

    def module_text(self, dotted):
        """The source of module `sglang.x.y` (x/y.py or x/y/__init__.py) and its file name."""
        parts = dotted.split('.')
        if parts[0] != PACKAGE:
            return None, None
        base = '/'.join(parts[1:])
        for name in (base + '.py', base + '/__init__.py'):
            if self.text(name) is not None:
                return name, self.text(name)
        return base + '.py', None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._zip.close()


def wheel_version(path):
    # A wheel's file name is `{distribution}-{version}-...` (PEP 427).
    parts = os.path.basename(path).split('-')
    if len(parts) < 3 or parts[0] != PACKAGE or not path.endswith('.whl'):
        raise SystemExit('sglang-contract: %s is not an sglang wheel' % path)
    return parts[1]


# --- 1. evidence ----------------------------------------------------------------------------------

def evidence_for(registry, version):
    """{entry: (fragments, the release they were written for)} as `version` is checked.

    An entry without fragments of its own for `version` is checked with those of the newest older
    release that has them: a release added to SUPPORTED is held to what the collection relies on
    until each moved text gets its own fragment. An entry with no older release (introduced later)
    or with an empty tuple for it does not apply."""
    wanted = registry.parse(version)
    chosen = {}
    for name, per_version in registry.EVIDENCE.items():
        known = sorted((v for v in per_version if registry.parse(v) <= wanted), key=registry.parse)
        if known:
            chosen[name] = (tuple(per_version[known[-1]]), known[-1])
    return chosen


def check_evidence(wheel, registry):
    """The failures and the counts of the EVIDENCE checks of one wheel."""
    failures = []
    entries = evidence_for(registry, wheel.version)
    files = set()
    fragments = inherited = 0
    for name, (pairs, written_for) in sorted(entries.items()):
        inherited += bool(pairs) and written_for != wheel.version
        for path, fragment in pairs:
            fragments += 1
            files.add(path)
            text = wheel.text(path)
            if text is None:
                failures.append("entry '%s': %s is not in the wheel (fragment %r)" % (name, path, fragment))
            elif fragment not in text:
                failures.append("entry '%s': %s no longer has %r" % (name, path, fragment))
    present = {name for name, chosen in entries.items() if chosen[0]}
    absent = sorted(set(registry.EVIDENCE) - present)
    summary = '%d entries, %d fragments in %d files' % (len(present), fragments, len(files))
    if inherited:
        summary += ' (%d of them with an older release\'s fragments)' % inherited
    if absent:
        summary += '; not in this release: %s' % ', '.join(absent)
    return failures, summary


# --- 2. argparse, read statically -----------------------------------------------------------------

class Parser:
    """What `sglang.launch_server`'s parser accepts: its option strings and allow_abbrev."""

    def __init__(self, options, allow_abbrev, registrations, fields):
        self.options = options
        self.allow_abbrev = allow_abbrev
        self.registrations = registrations
        self.fields = fields

    def verdict(self, arg):
        """argparse's own rule (3.11 `_parse_optional`): ('accepted' | 'ambiguous' | 'unknown', why)."""
        name = arg.split('=', 1)[0]
        if name in self.options:
            return 'accepted', 'exact'
        # Every option string counts, aliases of one action included: argparse counts them so.
        matches = sorted(o for o in self.options if o.startswith(name)) if self.allow_abbrev else []
        if len(matches) == 1:
            return 'accepted', 'a unique prefix of %s' % matches[0]
        if matches:
            return 'ambiguous', 'ambiguous: a prefix of %s' % ', '.join(matches)
        if not self.allow_abbrev:
            return 'unknown', 'no such option (abbreviations are off)'
        return 'unknown', 'no such option, nor a prefix of one'


def _call_name(call):
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _string(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    raise Unreadable('line %d: %s is no literal string' % (node.lineno, ast.unparse(node)))


def _parse(text, name):
    # A release written for a newer Python than this one reads as a failure, not a traceback.
    try:
        return ast.parse(text, name)
    except SyntaxError as error:
        raise Unreadable('%s does not parse here: %s' % (name, error)) from error


def _find(tree, kind, name):
    for node in ast.walk(tree):
        if isinstance(node, kind) and node.name == name:
            return node
    return None


def _parser_settings(tree):
    """allow_abbrev and add_help of the parser prepare_server_args builds (launch_server's)."""
    func = _find(tree, ast.FunctionDef, 'prepare_server_args')
    if func is None:
        raise Unreadable('no prepare_server_args()')
    calls = [n for n in ast.walk(func) if isinstance(n, ast.Call)]
    made = [c for c in calls if _call_name(c) == 'ArgumentParser']
    if len(made) != 1 or not any(ast.unparse(c.func) == 'ServerArgs.add_cli_args' for c in calls):
        raise Unreadable('prepare_server_args() does not build one ArgumentParser for ServerArgs.add_cli_args')
    settings = {'allow_abbrev': True, 'add_help': True}  # argparse's defaults
    for keyword in made[0].keywords:
        if keyword.arg in settings:
            if not isinstance(keyword.value, ast.Constant):
                raise Unreadable('ArgumentParser(%s=%s)' % (keyword.arg, ast.unparse(keyword.value)))
            settings[keyword.arg] = bool(keyword.value.value)
    return settings


def _add_argument_options(call):
    """The option strings of one add_argument call (its leading literal positional arguments)."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        raise Unreadable('line %d: add_argument(*...)' % call.lineno)
    return [_string(a) for a in call.args]


def _registrations(method):
    """add_argument calls and add_cli_args_from_dataclass classes in ServerArgs.add_cli_args."""
    options, dataclasses = [], []
    for node in ast.walk(method):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        if name == 'add_argument':
            options.append(_add_argument_options(node))
        elif name == 'add_cli_args_from_dataclass':
            if len(node.args) != 2 or not isinstance(node.args[1], ast.Name) or node.keywords:
                raise Unreadable('line %d: %s' % (node.lineno, ast.unparse(node)))
            dataclasses.append(node.args[1].id)
        elif any(isinstance(a, ast.Name) and a.id == 'parser' for a in node.args):
            # A helper that gets the parser may register options this reader would not see.
            raise Unreadable('line %d: the parser goes to %s()' % (node.lineno, ast.unparse(node.func)))
    return options, dataclasses


def _imports(tree):
    """{name: module} of a module's `from x import name` statements."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
    return found


def _list_names(tree, name):
    """The names in a module-level `NAME = [A, B, ...]`."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Name) for e in node.value.elts):
                return [e.id for e in node.value.elts]
            raise Unreadable('%s is not a list of names' % name)
    raise Unreadable('no %s' % name)


def _field_sources(wheel, tree, class_name):
    """[(file, ClassDef)] whose annotated fields make `class_name`'s: the class itself and, when the
    module builds it with collect_input_fields(LIST) (0.5.23), every namespace class of LIST."""
    own = _find(tree, ast.ClassDef, class_name)
    if own is None:
        raise Unreadable('no class %s' % class_name)
    sources = [(SERVER_ARGS, own)]
    collected = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and _call_name(c) == 'collect_input_fields']
    imports = _imports(tree)
    for call in collected:
        if len(call.args) != 1 or not isinstance(call.args[0], ast.Name):
            raise Unreadable('line %d: %s' % (call.lineno, ast.unparse(call)))
        for name in _list_names(tree, call.args[0].id):
            sources.append(_namespace_class(wheel, tree, imports, name))
    return sources


def _namespace_class(wheel, tree, imports, name):
    if name not in imports:
        found = _find(tree, ast.ClassDef, name)
        if found is None:
            raise Unreadable('namespace class %s: neither imported nor defined' % name)
        return SERVER_ARGS, found
    path, text = wheel.module_text(imports[name])
    if text is None:
        raise Unreadable('namespace class %s: no %s in the wheel' % (name, path))
    found = _find(_parse(text, path), ast.ClassDef, name)
    if found is None:
        raise Unreadable('no class %s in %s' % (name, path))
    return path, found


def _arg_options(field, call):
    """Options of `A[T, Arg(...)]` as add_cli_args_from_dataclass registers them; [] for no_cli."""
    keywords = {k.arg: k.value for k in call.keywords}
    if None in keywords or call.args:
        raise Unreadable('line %d: Arg(...) with arguments not by keyword' % call.lineno)
    no_cli = keywords.get('no_cli')
    if no_cli is not None:
        if not isinstance(no_cli, ast.Constant):
            raise Unreadable('line %d: no_cli=%s' % (call.lineno, ast.unparse(no_cli)))
        if no_cli.value:
            return []
    names = [_string(keywords['cli_name']) if 'cli_name' in keywords else '--' + field.replace('_', '-')]
    aliases = keywords.get('aliases')
    if aliases is not None and not (isinstance(aliases, ast.Constant) and aliases.value is None):
        if not isinstance(aliases, (ast.List, ast.Tuple)):
            raise Unreadable('line %d: aliases=%s' % (call.lineno, ast.unparse(aliases)))
        names += [_string(a) for a in aliases.elts]
    return names


def _is_help(meta):
    """A string: a literal, an f-string or a concatenation."""
    return isinstance(meta, (ast.JoinedStr, ast.BinOp)) or (isinstance(meta, ast.Constant) and isinstance(meta.value, str))


def _field_options(statement):
    """Options of one annotated field (arg_utils._unwrap_annotated): the first Arg(...) or help
    string of an `A[...]` / `Annotated[...]` annotation decides; a field with neither is no option."""
    annotation = statement.annotation
    if not isinstance(statement.target, ast.Name) or not isinstance(annotation, ast.Subscript):
        return []
    if ast.unparse(annotation.value).rsplit('.', 1)[-1] not in ('A', 'Annotated'):
        return []
    field = statement.target.id
    elements = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    for meta in elements[1:]:
        if _is_help(meta):
            return ['--' + field.replace('_', '-')]  # a bare string is the help: Arg(help=...)
        if isinstance(meta, ast.Call) and _call_name(meta) == 'Arg':
            return _arg_options(field, meta)
        if isinstance(meta, ast.Name):
            raise Unreadable('line %d: %s: metadata %s may be a help string' % (meta.lineno, field, meta.id))
    return []


def _dataclass_options(wheel, tree, class_name):
    options, fields = [], 0
    for _path, cls in _field_sources(wheel, tree, class_name):
        for statement in cls.body:
            if isinstance(statement, ast.AnnAssign):
                names = _field_options(statement)
                fields += bool(names)
                if names:
                    options.append(names)
    return options, fields


def read_parser(wheel):
    """The launch parser of a wheel: every option string add_cli_args registers, read with `ast`."""
    launch = wheel.text(LAUNCH[0]) or ''
    if LAUNCH[1] not in launch:
        raise Unreadable('%s does not call %s' % LAUNCH)
    text = wheel.text(SERVER_ARGS)
    if text is None:
        raise Unreadable('%s is not in the wheel' % SERVER_ARGS)
    tree = _parse(text, SERVER_ARGS)
    settings = _parser_settings(tree)
    cls = _find(tree, ast.ClassDef, 'ServerArgs')
    method = _find(cls, ast.FunctionDef, 'add_cli_args') if cls else None
    if method is None:
        raise Unreadable('no ServerArgs.add_cli_args')
    registered, dataclasses = _registrations(method)
    fields = 0
    for name in dataclasses:
        options, count = _dataclass_options(wheel, tree, name)
        registered += options
        fields += count
    if settings['add_help']:
        registered.append(['-h', '--help'])
    options = set()
    for names in registered:
        options.update(names)
    return Parser(options, settings['allow_abbrev'], len(registered), fields)


def check_arguments(wheel, registry):
    """The failures and the counts of the argument checks of one wheel."""
    try:
        parser = read_parser(wheel)
    except Unreadable as error:
        return ['argparse: cannot read %s statically: %s' % (SERVER_ARGS, error)], 'argparse unread'
    version = wheel.version
    failures, notes = [], []
    if version not in registry.DEFAULT_ARGS:
        failures.append('DEFAULT_ARGS: no entry for %s' % version)
    rendered = [('ROLE_ARGS', a) for a in registry.ROLE_ARGS]
    rendered += [('DEFAULT_ARGS', a) for a in registry.DEFAULT_ARGS.get(version, ()) if str(a).startswith('--')]
    for source, arg in rendered:
        verdict, why = parser.verdict(arg)
        if verdict != 'accepted':
            failures.append('argument %s (%s): %s' % (arg, source, why))
        elif why != 'exact':
            notes.append('%s is %s' % (arg, why))
    refused, replacements = [], 0
    for option, since, use in registry.REMOVED_ARGS:
        if registry.parse(version) < registry.parse(since):
            continue
        broken, verdict, count = _removed_failures(parser, option, since, use)
        failures += broken
        refused.append('%s %s' % (option, verdict))
        replacements += count
    accepted = sum(1 for _source, arg in rendered if parser.verdict(arg)[0] == 'accepted')
    summary = 'argparse: %d options (%d registrations, %d from fields, abbreviations %s); %d of %d rendered arguments accepted' % (
        len(parser.options), parser.registrations, parser.fields, 'on' if parser.allow_abbrev else 'off', accepted, len(rendered))
    if notes:
        summary += ' (%s)' % '; '.join(notes)
    if refused:
        summary += '; %d removed options refused (%s), their %d replacements present' % (len(refused), ', '.join(refused), replacements)
    else:
        summary += '; no removed option applies'
    return failures, summary


def _removed_failures(parser, option, since, use):
    """(failures, how argparse takes `option`, replacements named) of one REMOVED_ARGS entry."""
    failures = []
    verdict, why = parser.verdict(option)
    if verdict == 'accepted':
        failures.append('argument %s (REMOVED_ARGS, gone since %s): still accepted (%s)' % (option, since, why))
    replacements = OPTION.findall(use)
    if not replacements:
        failures.append('argument %s (REMOVED_ARGS): its replacement %r names no option' % (option, use))
    for replacement in replacements:
        if replacement not in parser.options:
            failures.append('argument %s (REMOVED_ARGS): replacement %s: %s' % (option, replacement, parser.verdict(replacement)[1]))
    return failures, verdict, len(replacements)


# --- the step -------------------------------------------------------------------------------------

def check_wheel(path, registry):
    """(summary line, failure lines) of one wheel."""
    with Wheel(path) as wheel:
        if wheel.version not in registry.SUPPORTED:
            return '', ['FAILED sglang %s: %s: the version is not in SUPPORTED' % (wheel.version, wheel.name)]
        evidence_failures, evidence = check_evidence(wheel, registry)
        argument_failures, arguments = check_arguments(wheel, registry)
    summary = 'sglang %s (%s): %s; %s' % (wheel.version, wheel.name, evidence, arguments)
    failures = ['FAILED sglang %s: %s' % (wheel.version, f) for f in evidence_failures + argument_failures]
    return summary, failures


def read_lock(path):
    """{version: sha256} of the lock's `sglang==V --hash=sha256:H` lines."""
    pins = {}
    with open(path) as handle:
        for line in handle:
            match = LOCK_LINE.match(line)
            if match:
                pins[match.group(1)] = match.group(2)
    return pins


def check_coverage(registry, lock, wheels):
    """Every SUPPORTED version pinned in the lock and given as a wheel, and nothing else pinned."""
    failures = []
    given = {wheel_version(w) for w in wheels}
    pins = read_lock(lock) if lock else None
    for version in registry.SUPPORTED:
        if pins is not None and version not in pins:
            failures.append('FAILED sglang %s: in SUPPORTED but not pinned in %s' % (version, os.path.relpath(lock, ROOT)))
        if version not in given:
            failures.append('FAILED sglang %s: in SUPPORTED but no wheel of it was given' % version)
    for version in sorted(set(pins or ()) - set(registry.SUPPORTED)):
        failures.append('FAILED sglang %s: pinned in %s but not in SUPPORTED' % (version, os.path.relpath(lock, ROOT)))
    return failures


def check(wheels, registry, lock=None, out=sys.stdout):
    """Prints the summary and failure lines; 0 when everything held, else 1."""
    failures = check_coverage(registry, lock, wheels) if lock else []
    for path in wheels:
        summary, broken = check_wheel(path, registry)
        if summary:
            print(summary, file=out)
        failures += broken
    for line in failures:
        print(line, file=out)
    return 1 if failures else 0


# --- the self-test --------------------------------------------------------------------------------

def reworded(fragment):
    """`fragment` as a release that rewords it might have it: another case."""
    return fragment.upper() if fragment.upper() != fragment else fragment.lower()


def break_copy(path, dest, registry, entry=SELF_TEST_ENTRY):
    """A copy of wheel `path` at `dest` with every fragment of `entry` reworded: what `check` must
    then fail on, naming `entry`."""
    version = wheel_version(path)
    pairs = evidence_for(registry, version)[entry][0]
    changed = {}
    for name, fragment in pairs:
        changed.setdefault(name, []).append(fragment)
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(dest, 'w') as copy:
        for info in source.infolist():
            data = source.read(info)
            name = info.filename[len(PACKAGE) + 1:] if info.filename.startswith(PACKAGE + '/') else None
            if name in changed:
                text = data.decode('utf-8')
                for fragment in changed.pop(name):
                    text = text.replace(fragment, reworded(fragment))
                data = text.encode('utf-8')
            copy.writestr(info, data)
    return sorted(pairs)


def self_test(wheels, registry_path=REGISTRY, out=sys.stdout):
    """Runs `check` (a process of its own, as the step does) on a broken copy of the smallest of
    `wheels` (the cheapest to rewrite); 0 when it fails naming the broken entry and nothing else."""
    registry = load_registry(registry_path)
    path = min(wheels, key=os.path.getsize)
    version = wheel_version(path)
    with tempfile.TemporaryDirectory(prefix='sglang-contract-') as tmp:
        copy = os.path.join(tmp, os.path.basename(path))
        pairs = break_copy(path, copy, registry)
        run = subprocess.run([sys.executable, os.path.abspath(__file__), 'check', '--registry', registry_path, copy],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    failed = [line for line in run.stdout.splitlines() if line.startswith('FAILED ')]
    named = "FAILED sglang %s: entry '%s':" % (version, SELF_TEST_ENTRY)
    held = run.returncode == 1 and failed and all(line.startswith(named) for line in failed)
    changes = ', '.join('%s: %r -> %r' % (name, fragment, reworded(fragment)) for name, fragment in pairs)
    print("self-test: check on a copy of %s with the '%s' text changed (%s) exited %d:" % (
        os.path.basename(path), SELF_TEST_ENTRY, changes, run.returncode), file=out)
    for line in run.stdout.splitlines():
        # `|` before each line: lanes.sh's end summary greps ` FAILED `; these are expected.
        print('  |' + line, file=out)
    if held:
        print("self-test: passed (the checker fails naming '%s', and only it)" % SELF_TEST_ENTRY, file=out)
        return 0
    print("FAILED self-test: the checker must exit 1 naming '%s' and nothing else" % SELF_TEST_ENTRY, file=out)
    return 1


def main(argv=None):
    cli = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    cli.add_argument('command', choices=('check', 'self-test'))
    cli.add_argument('wheels', nargs='+', metavar='WHEEL')
    cli.add_argument('--lock', help='the lock every SUPPORTED version must be pinned in')
    cli.add_argument('--registry', default=REGISTRY, help='sglang_versions.py (tests give their own)')
    args = cli.parse_args(argv)
    if args.command == 'self-test':
        return self_test(args.wheels, args.registry)
    return check(args.wheels, load_registry(args.registry), args.lock)


if __name__ == '__main__':
    sys.exit(main())
