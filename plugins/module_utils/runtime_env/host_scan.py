# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One read-only pass over a host for what was set by hand (issue 42), shared by runtime_env_host_edits, which
reports it, and runtime_env_adopt, which takes it over: the files are read, never run (hand_edits.py judges them)."""

from __future__ import annotations

import glob
import json
import os

from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env import hand_edits

HOOK_NAMES = ('inferops_runtime_env.pth', 'inferops_runtime_env.py')
ETC = '/etc'
# Run as `python -I -S`: nothing of site.py runs (its venv() would process the .pth files). A venv's site directory
# is named from its pyvenv.cfg; the system's and the user's count only where the venv includes them, as in site.py.
WHERE = r"""
import json, os, site, sys, sysconfig
here = os.path.dirname(os.path.abspath(sys.executable))
configs = [p for p in (os.path.join(here, "pyvenv.cfg"), os.path.join(os.path.dirname(here), "pyvenv.cfg")) if os.path.isfile(p)]
sites, system = [], True
if configs:
    prefix = os.path.dirname(configs[0])
    sites.append(sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})["purelib"])
    with open(configs[0]) as handle:
        settings = dict((k.strip().lower(), v.strip().lower()) for k, _, v in (l.partition("=") for l in handle) if _)
    system = settings.get("include-system-site-packages") == "true"
print(json.dumps({"stdlib": sysconfig.get_paths()["stdlib"], "sites": sites + (site.getsitepackages() if system else []),
                  "user": system, "version": "%d.%d" % sys.version_info[:2]}))
"""


# The options of both modules (their documentation: doc fragment inferops.gpu.host_scan).
ARGUMENT_SPEC = dict(
    pythons=dict(type='list', elements='path', default=['/usr/bin/python3']),
    homes=dict(type='list', elements='path', default=['/root']),
    managed_names=dict(type='list', elements='str', default=[]),
    managed_files=dict(type='list', elements='path', default=[]),
    owned_roots=dict(type='list', elements='path', default=[]),
    sonames=dict(type='list', elements='str', default=[]),
    command_timeout=dict(type='int', default=60),
)


def read(path):
    try:
        with open(path, 'rb') as handle:
            return handle.read().decode('utf-8', 'replace')
    except (IOError, OSError):
        return None


def python_files(pythons, homes, managed_files, run, warn):
    """The Python start-up files of each interpreter (site.py's order; each file once), the collection's own left out."""
    files = []
    for python in pythons:
        if not os.access(python, os.X_OK):
            continue
        # -I -S: the interpreter names its directories without running any start-up file.
        rc, out, err = run([python, '-I', '-S', '-c', WHERE])
        if rc != 0:
            warn('%s did not name its directories (rc %s): %s' % (python, rc, (err or out).strip()[-300:]))
            continue
        where = json.loads(out)
        user_sites = [os.path.join(home, '.local', 'lib', 'python%s' % where['version'], 'site-packages')
                      for home in homes] if where['user'] else []
        for path in hand_edits.start_up_files(where['stdlib'], where['sites'], user_sites):
            if path not in files and path not in managed_files and os.path.basename(path) not in HOOK_NAMES:
                files.append(path)
    return files


def login_files(etc):
    return [os.path.join(etc, 'environment')] + sorted(glob.glob(os.path.join(etc, 'profile.d', '*.sh')))


def scan(params, run, ldconfig, warn, etc=None):
    """{texts: {python: {path: text}, login: {path: text}}, findings, loader (foreign CUDA/NCCL entries), resolved, problems, cautions} for the module
    parameters pythons, homes, managed_names, managed_files, owned_roots, sonames; ldconfig: its path or None."""
    etc = etc or ETC
    managed_files = set(params['managed_files'])
    texts, findings, loader = {'python': {}, 'login': {}}, [], []
    for path in python_files(params['pythons'], params['homes'], managed_files, run, warn):
        text = read(path)
        if text is not None:
            texts['python'][path] = text
            findings.extend(hand_edits.python_edits(path, text))
    for path in login_files(etc):
        text = read(path)
        if text is not None and path not in managed_files:
            texts['login'][path] = text
            findings.extend(hand_edits.shell_edits(path, text))
    for path in sorted(glob.glob(os.path.join(etc, 'ld.so.conf.d', '*.conf'))):
        text = read(path)
        if text is not None and path not in managed_files:
            loader.extend(hand_edits.loader_entries(path, text))
    loader = hand_edits.cuda_entries(loader)
    resolved = {}
    if loader and ldconfig:
        rc, out, _err = run([ldconfig, '-p'])
        resolved = hand_edits.parse_ldconfig_cache(out) if rc == 0 else {}
    managed = set(params['managed_names']) | {'PATH'}
    problems, cautions = hand_edits.judge(findings, managed, loader, resolved, params['owned_roots'], params['sonames'])
    return dict(texts=texts, findings=findings, loader=loader, resolved=resolved, managed=managed,
                problems=problems, cautions=cautions)
