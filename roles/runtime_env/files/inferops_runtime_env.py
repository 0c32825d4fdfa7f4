# Managed by the inferops.gpu.runtime_env role (Ansible): local edits are overwritten.
"""Apply the inferops runtime environment spec when a Python interpreter starts.

Loaded by ``inferops_runtime_env.pth`` from the same site-packages directory. It is a module
loaded by a ``.pth`` file rather than a ``sitecustomize.py`` because Debian and Ubuntu ship
``/usr/lib/python3.X/sitecustomize.py``: the standard library comes first on ``sys.path``, so
that file shadows any ``sitecustomize.py`` placed in a venv, while site.py processes every
``.pth`` file of a site directory (the venv's included) before it imports sitecustomize.

The module is static (identical in every ml-env release); the values live in the JSON spec the
role renders to SPEC_PATH. Variables already in the environment win (``setdefault``); PATH
entries are prepended only when missing, so nested interpreters do not grow PATH.

It must never break an interpreter: any problem leaves the environment untouched, and says so
on stderr only when INFEROPS_RUNTIME_ENV_DEBUG is set.
"""

import json
import os
import sys

SPEC_PATH = "/etc/inferops/runtime-env.json"


def _is_str(value):
    return isinstance(value, str) and "\0" not in value


def apply_spec(spec, environ):
    """Set the spec's variables that environ lacks and prepend its missing PATH entries."""
    for name, value in sorted(spec.get("vars", {}).items()):
        if _is_str(name) and name and "=" not in name and _is_str(value):
            environ.setdefault(name, value)
    current = environ.get("PATH")
    entries = current.split(os.pathsep) if current is not None else os.defpath.split(os.pathsep)
    missing = []
    for entry in spec.get("path_prepend", []):
        if _is_str(entry) and entry and os.pathsep not in entry and entry not in entries and entry not in missing:
            missing.append(entry)
    if missing:
        environ["PATH"] = os.pathsep.join(missing + entries)


def _main():
    try:
        with open(os.environ.get("INFEROPS_RUNTIME_ENV_SPEC", SPEC_PATH), "rb") as handle:
            spec = json.loads(handle.read().decode("utf-8"))
        if not isinstance(spec, dict):
            raise ValueError("the spec is not a JSON object")
        apply_spec(spec, os.environ)
    except Exception as exc:
        # A start-up hook that raises would break every interpreter of the venv.
        if os.environ.get("INFEROPS_RUNTIME_ENV_DEBUG"):
            sys.stderr.write("inferops_runtime_env: spec not applied: %s\n" % exc)


_main()
