"""Stands in for get-pip.py when ansible-test bootstraps pip into its sanity venvs.

The real script is served from a host that is not reachable here; its job (put the requested pip
into an empty venv) is done with the interpreter's own ensurepip and then pip from the package index.
"""

import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}

subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"])
args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
subprocess.check_call([sys.executable, "-m", "pip", "install", *args])
