# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs a module's main() in-process: arguments in, the exit_json/fail_json payload out."""

from __future__ import annotations

import contextlib
import glob
import importlib
import json
import os
import subprocess
import sys
from unittest import mock

import pytest
import yaml

from ansible.module_utils import basic

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core before 2.19
    @contextlib.contextmanager
    def patch_module_args(args=None):
        payload = json.dumps({'ANSIBLE_MODULE_ARGS': args or {}}).encode()
        with mock.patch.object(basic, '_ANSIBLE_ARGS', payload):
            yield


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


def _exit_json(self, **kwargs):
    raise ExitJson(kwargs)


def _fail_json(self, msg, **kwargs):
    kwargs.update(failed=True, msg=msg)
    raise FailJson(kwargs)


def patch_exits(monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, 'fail_json', _fail_json)


def invoke(module, args):
    """main() of `module` with `args`; exit_json/fail_json must be patched (patch_exits)."""
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as info:
            module.main()
    return info.value.args[0]


TIMEOUT = '/usr/bin/timeout'
# The SGLang stand-in package (tests/fixtures/sglang_standin), for the module tests that run it.
SGLANG_STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'fixtures', 'sglang_standin')


def unbounded(argv):
    """The command inside the timeout(1) wrapper every module puts around what it runs."""
    argv = list(argv)
    assert argv[0] == TIMEOUT and argv[1].startswith('--kill-after=') and argv[2].endswith('s'), argv
    return argv[3:]


# Documentation against behaviour: a cheap stand-in for validate-modules that runs with the unit tests.

def record_argument_spec(monkeypatch, module):
    """The keyword arguments `module` builds its AnsibleModule with, filled in once main() ran."""
    seen = {}
    real = basic.AnsibleModule

    def recording(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, 'AnsibleModule', recording)
    return seen


def assert_options_match_spec(module, seen):
    assert seen['supports_check_mode'] is True
    spec = seen['argument_spec']
    documentation = yaml.safe_load(module.DOCUMENTATION)
    options = dict(documentation.get('options') or {})
    # The collection's own doc fragments (plugins/doc_fragments/NAME.py, VARIABLE or DOCUMENTATION) add theirs.
    for fragment in documentation.get('extends_documentation_fragment') or []:
        if fragment.startswith('inferops.gpu.'):
            name, _dot, variable = fragment[len('inferops.gpu.'):].partition('.')
            holder = importlib.import_module('ansible_collections.inferops.gpu.plugins.doc_fragments.' + name).ModuleDocFragment
            options.update(yaml.safe_load(getattr(holder, (variable or 'documentation').upper())).get('options') or {})
    assert set(options) == set(spec)
    for name, doc in options.items():
        assert doc['type'] == spec[name]['type'], name
        assert doc.get('default') == spec[name].get('default'), name
        assert doc.get('choices') == spec[name].get('choices'), name
        assert doc.get('elements') == spec[name].get('elements'), name
        assert doc.get('required', False) == spec[name].get('required', False), name
    return options


def assert_documented(value, doc, where):
    """`value` (a module result's key) has the type and keys its RETURN entry `doc` documents."""
    if isinstance(value, dict):
        assert set(value) == set(doc['contains']), where
        for key, item in value.items():
            if item is not None:
                assert_documented(item, doc['contains'][key], where + '.' + key)
    elif isinstance(value, list):
        assert doc['type'] == 'list', where
        for item in value:
            if doc.get('elements') == 'dict':
                assert_documented(item, doc, where + '[]')
            else:
                assert type(item).__name__ == doc['elements'], where
    else:
        assert type(value).__name__ == doc['type'], where
        if 'choices' in doc:
            assert value in doc['choices'], where


def make_venv(root):
    """(python, site-packages) of a new venv at `root` (no pip: a release's interpreter, as the modules run it)."""
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(root)], check=True, timeout=120)
    return os.path.join(str(root), 'bin', 'python'), glob.glob(os.path.join(str(root), 'lib', 'python*', 'site-packages'))[0]


def include_system_site(python):
    """Turn on the venv's include-system-site-packages: site.py then reads the user site too."""
    cfg = os.path.join(os.path.dirname(os.path.dirname(python)), 'pyvenv.cfg')
    with open(cfg) as handle:
        text = handle.read().replace('include-system-site-packages = false', 'include-system-site-packages = true')
    with open(cfg, 'w') as handle:
        handle.write(text)
