# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs a module's main() in-process: arguments in, the exit_json/fail_json payload out."""

from __future__ import annotations

import contextlib
import json
from unittest import mock

import pytest

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


def unbounded(argv):
    """The command inside the timeout(1) wrapper every module puts around what it runs."""
    argv = list(argv)
    assert argv[0] == TIMEOUT and argv[1].startswith('--kill-after=') and argv[2].endswith('s'), argv
    return argv[3:]
