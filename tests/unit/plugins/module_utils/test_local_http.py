# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plain-HTTP transport against a real local server: answers, errors, and its cost."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils._common.local_http import request
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.server_module import http as module_http


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _answer(self, status, text):
        data = text.encode('utf-8')
        self.send_response(status)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == '/drop':
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if self.path == '/slow':
            time.sleep(1.0)
        if self.path.startswith('/health'):
            return self._answer(503, '')
        return self._answer(200, json.dumps({'path': self.path, 'auth': self.headers.get('Authorization')}))

    def do_POST(self):
        body = self.rfile.read(int(self.headers['Content-Length'])).decode('utf-8')
        self._answer(200, json.dumps({'got': json.loads(body)}))


@pytest.fixture(scope='module')
def server():
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield 'http://127.0.0.1:%d' % httpd.server_address[1]
    httpd.shutdown()


def test_an_answer_with_its_status_headers_and_query(server):
    status, text, error = request('GET', server + '/v1/models?x=1', {'Authorization': 'Bearer k'}, None, 5)
    assert (status, error) == (200, None)
    assert json.loads(text) == {'path': '/v1/models?x=1', 'auth': 'Bearer k'}


def test_a_post_body_in_utf8(server):
    status, text, dummy = request('POST', server + '/generate', {'Content-Type': 'application/json'},
                                  json.dumps({'text': 'Città'}), 5)
    assert status == 200 and json.loads(text) == {'got': {'text': 'Città'}}


def test_an_error_status_is_an_answer(server):
    assert request('GET', server + '/health_generate', {}, None, 5) == (503, '', None)


def test_no_server_is_no_answer_with_the_reason():
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    status, text, error = request('GET', 'http://127.0.0.1:%d/health' % port, {}, None, 5)
    assert status is None and 'Connection refused' in error


def test_a_timeout_and_a_dropped_connection_are_no_answer(server):
    status, dummy, error = request('GET', server + '/slow', {}, None, 0.2)
    assert status is None and 'timed out' in error
    status, dummy, error = request('GET', server + '/drop', {}, None, 5)
    assert status is None and error


def test_the_modules_transport_uses_it_for_http_and_is_cheap(server):
    # open_url costs ~35 ms of CPU a request; the health gate makes four in a row.
    # CPU time (this process, the test server's thread included), not wall time: the suite runs
    # beside other work, and a loaded machine stretches the wall clock of any request.
    module_http('GET', server + '/ping', {}, None, 5)
    began = time.process_time()
    for dummy in range(20):
        assert module_http('GET', server + '/ping', {}, None, 5)[0] == 200
    assert (time.process_time() - began) / 20 < 0.015


def test_other_schemes_are_refused():
    with pytest.raises(ValueError):
        request('GET', 'https://127.0.0.1/', {}, None, 5)
