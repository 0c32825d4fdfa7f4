# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a process of the release really sees, held against the spec (issue 42).

The spec reaches a process three ways: the unit's EnvironmentFile= (systemd has no setdefault), the
start-up hook (a .pth line in the release's site-packages: setdefault), and whatever else runs while
site.py initialises the interpreter after it: a distro's or a hand-edited ``sitecustomize.py``, a
``usercustomize.py``, another ``.pth`` line. site.py processes the .pth files first and imports
sitecustomize after them, so a plain ``os.environ[...] = ...`` there beats the hook's setdefault, and
the unit's own environment (``/proc/PID/environ``) still shows the spec while the interpreter uses
the other value. Only running the interpreter as the server starts shows it.

The probe runs in two steps. ``LAUNCH`` (``python -I -S``) reads its request from stdin, so no value
reaches an argv: it changes to the working directory and execs the second step with the environment
the unit gives (``build_env``), through setpriv as the service user when there is one, as the process
manager starts the server. ``PROBE`` (``python -S``: site not run yet) records every write to
``os.environ`` with the file and line that made it, then runs ``site.main()`` as the interpreter
would have, and answers with the values of the names asked for (never the others': the environment
may hold secrets), where each was last set, the names the site hooks set beyond those, the
customize modules imported, and the file the loader resolves for each library asked for
(``ctypes.CDLL`` then ``/proc/self/maps``). ``judge`` turns the answer into problems and warnings.
"""

from __future__ import annotations

import json
import os
import pwd

from ansible_collections.inferops.gpu.plugins.module_utils._common.environment_file import environment_lines

MARKER = 'INFEROPS-EFFECTIVE-ENV '
LAUNCH = ('import json, os, sys\n'
          'request = json.load(sys.stdin)\n'
          'os.chdir(request["cwd"])\n'
          'os.execve(request["argv"][0], request["argv"], request["env"])\n')
PROBE = r'''
import json, os, sys
request = json.loads(sys.argv[1])
# -c put the working directory first on sys.path; `python -m` adds its own entry only after site ran.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]
writes = {}
Environ = type(os.environ)
HERE = ("__setitem__", "__delitem__", "where")
# os.environ's own methods (setdefault, update): frozen in the interpreters that freeze the stdlib's start-up modules.
LIBRARY = {getattr(sys.modules.get(name), "__file__", None) or "<frozen %s>" % name for name in ("os", "_collections_abc")}
LIBRARY |= {"<frozen os>", "<frozen _collections_abc>"}


def where():
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_name in HERE and frame.f_code.co_filename == "<string>"
                                 or frame.f_code.co_filename in LIBRARY):
        frame = frame.f_back
    if frame is None:
        return ["?", 0]
    caller = frame.f_back
    # A .pth line runs through exec() in site.addpackage: name the .pth file and its line; other exec()'d code is
    # named by the line that ran it.
    if frame.f_code.co_filename == "<string>" and caller is not None and caller.f_code.co_name == "addpackage":
        return [str(caller.f_locals.get("fullname", "?")), int(caller.f_locals.get("n", -1)) + 1]
    if frame.f_code.co_filename == "<string>" and caller is not None:
        return [caller.f_code.co_filename, caller.f_lineno]
    return [frame.f_code.co_filename, frame.f_lineno]


class Recorded(Environ):
    def __setitem__(self, key, value):
        writes[key] = where()
        Environ.__setitem__(self, key, value)

    def __delitem__(self, key):
        writes[key] = where()
        Environ.__delitem__(self, key)


os.environ.__class__ = Recorded
import site
site.main()
os.environ.__class__ = Environ
names = request["names"]
libraries = {}
for name in request["libraries"]:
    import ctypes
    try:
        ctypes.CDLL(name)
    except OSError as exc:
        libraries[name] = {"path": None, "error": str(exc)}
        continue
    found = None
    with open("/proc/self/maps") as handle:
        for line in handle:
            path = line.split(None, 5)[-1].strip() if len(line.split(None, 5)) == 6 else ""
            if os.path.basename(path).startswith(name):
                found = path
                break
    libraries[name] = {"path": found, "error": ""}
modules = {}
for name in ("sitecustomize", "usercustomize"):
    module = sys.modules.get(name)
    modules[name] = getattr(module, "__file__", None) if module is not None else None
print("MARKER" + json.dumps({
    "python": sys.executable, "uid": os.getuid(), "cwd": os.getcwd(),
    "environ": {name: os.environ.get(name) for name in names},
    "writes": {name: writes[name] for name in writes if name in names},
    "others": sorted([name] + writes[name] for name in writes if name not in names),
    "modules": modules, "libraries": libraries}))
'''.replace('MARKER', MARKER)
HOOK = 'inferops_runtime_env.py'


def build_env(base, environment, files):
    """The environment the unit gives and where each name came from: `base` (the manager's own), then the
    unit's Environment= values, then each EnvironmentFile= in order ({path: text}), as systemd applies them."""
    env, origin = dict(base), {name: 'the manager\'s environment' for name in base}
    for name, value in environment.items():
        env[name], origin[name] = str(value), 'Environment='
    for path, text in files:
        for name, (value, number) in environment_lines(text).items():
            env[name], origin[name] = value, '%s line %d' % (path, number)
    return env, origin


def launch_request(python, env, cwd, names, libraries, user='', group='', setpriv='setpriv'):
    """(argv of the first step, its stdin): the second step's argv and environment travel on stdin."""
    argv = [python, '-S', '-c', PROBE, json.dumps({'names': sorted(names), 'libraries': list(libraries)})]
    if user:
        argv = [setpriv, '--reuid=%s' % user, '--regid=%s' % (group or user), '--init-groups', '--'] + argv
    return [python, '-I', '-S', '-c', LAUNCH], json.dumps({'argv': argv, 'env': env, 'cwd': cwd})


def answer(rc, out, err):
    """The probe's answer; None (and why) when it printed none."""
    for line in reversed((out or '').splitlines()):
        if line.startswith(MARKER):
            try:
                return json.loads(line[len(MARKER):]), ''
            except ValueError:
                break
    return None, 'the probe printed no answer (rc %s): %s' % (rc, ' '.join((err or out or '').strip().splitlines()[-3:])[:600])


def describe_setter(found, origin, name):
    """Where `name` got the value the interpreter sees: the file and line of a site hook, else the unit's."""
    return _setter(found, origin, name)[0]


def _setter(found, origin, name):
    written = (found.get('writes') or {}).get(name)
    if written:
        path, line = written
        return '%s line %s' % (path, line), os.path.basename(str(path)) == HOOK
    return origin.get(name, 'nothing (the name is unset)'), False


def judge(found, expected, path_prepend, origin, libraries, realpath=os.path.realpath):
    """(problems, warnings). expected: {name: value} the process must see; path_prepend: the entries PATH must
    begin with; origin: build_env's; libraries: {soname: [directories the file must be under]}."""
    problems, warnings = [], []
    environ = found.get('environ') or {}
    for name in sorted(expected):
        have = environ.get(name)
        if have == expected[name]:
            continue
        setter, by_hook = _setter(found, origin, name)
        if by_hook:
            fix = 'the start-up hook\'s spec file is not the one the role rendered'
        elif (found.get('writes') or {}).get(name):
            fix = 'remove that assignment (the start-up hook then gives the spec\'s value)'
        else:
            fix = 'the unit\'s environment sets it, and the start-up hook never overrides a value a process has'
        problems.append('%s: the release\'s Python sees %s, the spec says %s: set by %s; %s'
                        % (name, json.dumps(have), json.dumps(expected[name]), setter, fix))
    path = (environ.get('PATH') or '').split(os.pathsep)
    if path_prepend and path[:len(path_prepend)] != list(path_prepend):
        setter = _setter(found, origin, 'PATH')[0]
        problems.append('PATH: the release\'s Python sees %s, which does not begin with the spec\'s %s: set by %s'
                        % (json.dumps(environ.get('PATH')), json.dumps(os.pathsep.join(path_prepend)), setter))
    for entry in found.get('others') or []:
        name, path, line = entry
        if os.path.basename(str(path)) != HOOK:
            warnings.append('%s is set by %s line %s while the interpreter starts, beyond the spec'
                            % (name, path, line))
    for soname, under in sorted(libraries.items()):
        loaded = (found.get('libraries') or {}).get(soname) or {}
        if not loaded.get('path'):
            continue  # a toolkit of compilers only (NVIDIA's wheels) has no runtime: the result says so
        real = realpath(loaded['path'])
        roots = [realpath(root).rstrip('/') + '/' for root in under if root]
        if roots and not any(real.startswith(root) for root in roots):
            problems.append('%s: the loader resolves %s (%s), not a file under %s: an ld.so.conf.d entry or '
                            'LD_LIBRARY_PATH points it elsewhere' % (soname, loaded['path'], real, ', '.join(under)))
    return problems, warnings


SYSTEMD_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'


class ProbeError(Exception):
    """The probe gave no answer (the message says why)."""


def base_environment(base, systemd_path=SYSTEMD_PATH, user='', environ=None, getpwnam=pwd.getpwnam):
    """The environment the manager starts from: systemd's (PATH, and the user's HOME, USER, LOGNAME, SHELL) or, for
    `inherit`, this process's own (the collection's process manager passes it on). KeyError: no such user."""
    if base == 'inherit':
        return dict(os.environ if environ is None else environ)
    env = {'PATH': systemd_path}
    if user:
        entry = getpwnam(user)
        env.update(HOME=entry.pw_dir, USER=entry.pw_name, LOGNAME=entry.pw_name, SHELL=entry.pw_shell)
    return env


def check(run_command, python, env, origin, cwd, expected, path_prepend, libraries, user='', group='',
          setpriv='setpriv'):
    """Run the probe as the unit would start `python` and judge it: {environ, setters, modules, libraries, problems,
    cautions}. run_command(argv, data=, binary_data=) is bounded by the caller; ProbeError when it gave no answer."""
    expected = dict((name, str(value)) for name, value in expected.items())  # YAML may give a number
    names = set(expected) | {'PATH'}
    argv, data = launch_request(python, env, cwd, names, sorted(libraries), user, group, setpriv)
    rc, out, err = run_command(argv, data=data, binary_data=True)
    found, why = answer(rc, out, err)
    if found is None:
        raise ProbeError('%s: %s' % (python, why))
    problems, warnings = judge(found, expected, path_prepend, origin, libraries)
    return dict(environ=found['environ'], setters={name: describe_setter(found, origin, name) for name in sorted(names)},
                modules=found['modules'], libraries=found['libraries'], problems=problems, cautions=warnings)
