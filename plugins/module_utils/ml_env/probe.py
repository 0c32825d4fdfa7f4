# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe that runs inside the venv's own interpreter, and reading its answer.

The module itself runs on Ansible's interpreter; what the venv sees (installed distributions,
import results, torch's CUDA build and GPUs, where the shared objects are) can only be asked of
the venv's interpreter. The probe reads a JSON request on stdin and prints one JSON line after
MARKER; anything imported modules print goes to stderr.
"""

from __future__ import annotations

import json

MARKER = '@@ml_env_probe@@'

_PROBE = r'''
import glob, importlib, importlib.util, json, os, re, sys
request = json.loads(sys.stdin.read())
real_stdout, sys.stdout = sys.stdout, sys.stderr

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

def last_line(exc):
    text = ("%s: %s" % (type(exc).__name__, exc)).strip()
    return text.splitlines()[-1] if text else type(exc).__name__

try:
    from importlib import metadata
except ImportError:
    metadata = None

dists = {}
if metadata is not None:
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and norm(name) not in dists:  # the first one on sys.path wins, as for imports
            dists[norm(name)] = dist

def shared_objects(dist):
    found = []
    for item in dist.files or []:
        text = str(item)
        if text.endswith(".so") or ".so." in os.path.basename(text):
            found.append(os.path.realpath(str(dist.locate_file(item))))
    return found

packages = []
provider_dir = None
spec = importlib.util.find_spec(request["abi_provider"]) if request["abi_provider"] else None
if spec is not None and spec.submodule_search_locations:
    provider_dir = os.path.realpath(list(spec.submodule_search_locations)[0])
extensions = []
for name in request["pins"]:
    dist = dists.get(norm(name))
    packages.append({"name": name, "installed": dist.version if dist else None})
    if dist is not None:
        extensions += shared_objects(dist)

roots = [p for p in sys.path if p and os.path.isdir(p)]
globbed = []
for pattern in request["extension_globs"]:
    for base in ([""] if os.path.isabs(pattern) else roots):
        globbed += [os.path.realpath(p) for p in glob.glob(os.path.join(base, pattern))]

providers = []
if provider_dir:
    for pattern in ("lib/*.so*", "*.so"):
        providers += [os.path.realpath(p) for p in glob.glob(os.path.join(provider_dir, pattern))]
    # torch's own files are the providers, not stack extensions, unless a glob names them.
    extensions = [p for p in extensions if not p.startswith(provider_dir + os.sep)]
extensions += globbed

imports = []
for item in request["imports"]:
    entry = {"name": item["name"], "version": None, "error": None}
    try:
        module = importlib.import_module(item["name"])
        value = getattr(module, item.get("attribute") or "__version__", None)
        entry["version"] = None if value is None else str(value)
    except BaseException as exc:
        entry["error"] = last_line(exc)
    imports.append(entry)

torch_cuda = gpu_count = None
torch = sys.modules.get("torch")
if torch is not None:
    try:
        torch_cuda = getattr(torch.version, "cuda", None)
        gpu_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except BaseException as exc:
        imports.append({"name": "torch.cuda", "version": None, "error": last_line(exc)})

result = {
    "python_version": "%d.%d.%d" % sys.version_info[:3],
    "prefix": sys.prefix,
    "packages": packages,
    "imports": imports,
    "torch_cuda": torch_cuda,
    "gpu_count": gpu_count,
    "extensions": sorted(set(extensions)),
    "providers": sorted(set(providers)),
    "provider_dir": provider_dir,
}
real_stdout.write("__MARKER__" + json.dumps(result) + "\n")
real_stdout.flush()
'''


def probe_source():
    """The probe program, with the marker it prints in front of its answer."""
    return _PROBE.replace('__MARKER__', MARKER)


def parse_probe_output(stdout):
    """The probe's answer, or None when it did not get as far as printing it."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER):])
    return None


def request(pins, imports, abi_provider, extension_globs):
    return json.dumps({
        'pins': list(pins),
        'imports': list(imports),
        'abi_provider': abi_provider or '',
        'extension_globs': list(extension_globs),
    })
