# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The converged module end to end: a real HTTP health endpoint, a real venv release, check mode."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading

import pytest

from ansible_collections.inferops.gpu.plugins.modules import converged
from module_harness import invoke, patch_exits

DIGEST = 'd' * 64


class Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):  # noqa: N802 (the stdlib's name)
        self.send_response(Health.status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope='module')
def server():
    httpd = http.server.HTTPServer(('127.0.0.1', 0), Health)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield 'http://127.0.0.1:%d/health' % httpd.server_address[1]
    httpd.shutdown()


@pytest.fixture(scope='module')
def release(tmp_path_factory):
    """A verified release (a venv without pip: no distribution to check) behind a link."""
    root = tmp_path_factory.mktemp('ml-env')
    name = 'r1'
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(root / name)], check=True, timeout=120)
    (root / name / '.verified').write_text(name + '\n')
    os.symlink(str(root / name), str(root / 'current'))
    return root


@pytest.fixture
def node(tmp_path, server, release):
    (tmp_path / 'unit').write_text('[Service]\n')
    Health.status = 200
    return {'path': str(tmp_path / 'state' / 'converged.json'), 'digest': DIGEST,
            'paths': [str(tmp_path / 'unit'), str(release / 'current')], 'releases': [str(release / 'current')],
            'health_url': server, 'gpu_dir': str(tmp_path / 'no-driver'), 'timeout': 30}


def test_record_then_check_then_drift(node, monkeypatch, tmp_path, release):
    patch_exits(monkeypatch)
    done = invoke(converged, dict(node, state='recorded'))
    assert done['changed'] and oct(os.stat(node['path']).st_mode & 0o777) == '0o600'
    assert not invoke(converged, dict(node, state='recorded'))['changed']
    checked = invoke(converged, {'path': node['path'], 'digest': DIGEST})
    assert checked['converged'] and not checked['changed'] and checked['msg'] == 'converged: nothing to do'
    Health.status = 503
    checked = invoke(converged, {'path': node['path'], 'digest': DIGEST})
    assert not checked['converged'] and checked['drift'] == ['%s answered 503' % node['health_url']]
    Health.status = 200
    os.rename(str(release / 'r1' / '.verified'), str(release / 'r1' / '.verified.off'))
    try:
        checked = invoke(converged, {'path': node['path'], 'digest': DIGEST})
    finally:
        os.rename(str(release / 'r1' / '.verified.off'), str(release / 'r1' / '.verified'))
    assert not checked['converged'] and 'has no valid verification marker' in checked['drift'][0]
    (tmp_path / 'unit').write_text('[Service]\nX=1\n')
    checked = invoke(converged, {'path': node['path'], 'digest': DIGEST})
    assert checked['msg'] == 'not converged: %s: its content changed' % node['paths'][0]


def test_check_mode_writes_and_removes_nothing(node, monkeypatch):
    patch_exits(monkeypatch)
    done = invoke(converged, dict(node, state='recorded', _ansible_check_mode=True))
    assert done['changed'] and not os.path.exists(node['path'])
    invoke(converged, dict(node, state='recorded'))
    done = invoke(converged, {'state': 'absent', 'path': node['path'], '_ansible_check_mode': True})
    assert done['changed'] and os.path.exists(node['path'])
    assert invoke(converged, {'state': 'absent', 'path': node['path']})['changed']
    assert not os.path.exists(node['path'])
    assert not invoke(converged, {'state': 'absent', 'path': node['path']})['changed']


def test_bad_arguments_are_refused_with_what_is_allowed(node, monkeypatch):
    patch_exits(monkeypatch)
    done = invoke(converged, dict(node, state='recorded', paths=['relative'], health_url='ftp://x'))
    assert done['failed'] and "paths: every path must be absolute (got 'relative')" in done['msg']
    assert "health_url: must start with http:// or https://" in done['msg'] and not os.path.exists(node['path'])
    done = invoke(converged, {'state': 'checked', 'path': node['path']})
    assert done['failed'] and 'digest' in done['msg']
    done = invoke(converged, dict(node, timeout=0))
    assert done['failed'] and 'timeout must be at least 1 second' in done['msg']


def test_a_node_whose_server_does_not_answer_is_not_recorded(node, monkeypatch):
    patch_exits(monkeypatch)
    Health.status = 503
    done = invoke(converged, dict(node, state='recorded'))
    assert done['failed'] and not os.path.exists(node['path'])
    assert done['msg'] == 'not recorded as converged, the node does not serve: %s answered 503' % node['health_url']
