# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared helpers: import path for the collection and nvidia-smi capture replay."""

from __future__ import annotations

import os
import re
import shutil
import sys

import pytest
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# .collections/ansible_collections/inferops/gpu is a committed symlink to the repo root.
COLLECTIONS = os.path.join(REPO_ROOT, '.collections')
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
# ansible-core's collection loader, as ansible-playbook (and ansible-test's unit runner) installs it,
# before any test imports the collection: templates rendered in a test (the bad-input cases of
# plugins/lookup/) resolve the collection's filters (inferops.gpu.*) only through it.
_AnsibleCollectionFinder(paths=[COLLECTIONS], scan_sys_paths=False)._install()
# tests/unit/ports.py (free_port) for every test folder.
UNIT_TESTS = os.path.dirname(os.path.abspath(__file__))
if UNIT_TESTS not in sys.path:
    sys.path.append(UNIT_TESTS)
# On sys.path just now, so imported here.
from node_stub import serve  # noqa: E402  pylint: disable=wrong-import-position
# The module tests share module_harness.py (run a module's main() in-process).
MODULE_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'plugins', 'modules')
if MODULE_TESTS not in sys.path:
    sys.path.append(MODULE_TESTS)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'nvidia_smi')
CAPTURE_SCRIPT = os.path.join(REPO_ROOT, 'tests', 'gpu', 'capture_nvidia_smi.sh')
SYSTEMS = sorted(os.listdir(FIXTURES))
# The capture script keeps output only; exit codes of the recorded commands live here.
EXIT_CODES = {'broken_driver': 9}
SMI = '/usr/bin/nvidia-smi'


def read_fixture(system, name):
    with open(os.path.join(FIXTURES, system, name)) as handle:
        return handle.read()


def capture_query(name):
    """Value of a shell variable (q_gpu, ...) in the capture script."""
    with open(CAPTURE_SCRIPT) as handle:
        return re.search(r'^%s=(\S+)$' % name, handle.read(), re.MULTILINE).group(1)


class SmiReplay:
    """Stands in for run_command: answers nvidia-smi calls from one fixture directory.

    overrides maps a fixture file name to (rc, stdout) to simulate one failing call.
    """

    def __init__(self, system, path=SMI, overrides=None):
        self.system = system
        self.path = path
        self.overrides = overrides or {}
        self.calls = []

    def file_for(self, args):
        if args == ['--query-gpu=%s' % capture_query('q_gpu'), '--format=csv,noheader,nounits']:
            return 'query_gpu.csv'
        if args == ['--query-compute-apps=gpu_uuid,pid,process_name,used_memory', '--format=csv,noheader,nounits']:
            return 'query_apps.csv'
        return {('topo', '-m'): 'topo.txt', (): 'nvidia_smi.txt', ('--version',): 'version.txt'}[tuple(args)]

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        assert argv[0] == self.path
        name = self.file_for(list(argv[1:]))
        if name in self.overrides:
            rc, out = self.overrides[name]
            return rc, out, ''
        return EXIT_CODES.get(self.system, 0), read_fixture(self.system, name), ''

    def ran(self, name):
        return any(self.file_for(call[1:]) == name for call in self.calls)


@pytest.fixture
def smi_replay():
    return SmiReplay


@pytest.fixture
def fixture_text():
    return read_fixture


@pytest.fixture
def fixture_systems():
    return SYSTEMS


@pytest.fixture
def capture_script_query():
    return capture_query


ABI_FIXTURES = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'abi')


@pytest.fixture(scope='session')
def torch_sized_provider(tmp_path_factory):
    """Path of a shared object exporting as many symbols as libtorch (tests/fixtures/abi/torch_sized.py)."""
    if not all(shutil.which(tool) for tool in ('gcc', 'nm', 'c++filt')):
        pytest.skip('needs gcc and binutils')
    sys.path.insert(0, ABI_FIXTURES)
    try:
        import torch_sized
    finally:
        sys.path.remove(ABI_FIXTURES)
    dest = str(tmp_path_factory.mktemp('torch_sized') / 'libc10.so')
    torch_sized.build(dest)
    return dest


@pytest.fixture(scope='module')
def stub():
    """The port of a stub SGLang server (tests/unit/node_stub.py's Stub), for node_info's tests."""
    port, stop = serve()
    yield port
    stop()
