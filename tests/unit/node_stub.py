# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What node_info's tests share (tests/unit/conftest.py puts this folder on sys.path): recorded tool
outputs of a node and a stub SGLang server answering the readiness contract."""

from __future__ import annotations

import http.server
import json
import threading

# Recorded: `ptxas --version` of CUDA 13.0.2 (/usr/local/cuda-13.0/bin/ptxas).
PTXAS_13 = """ptxas: NVIDIA (R) Ptx optimizing assembler
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:55:12_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""
VERSION_JSON = '{\n   "cuda" : {\n      "name" : "CUDA SDK",\n      "version" : "12.8.1"\n   }\n}\n'
# `systemctl show` of the server's unit, running (MainPID filled in) and stopped.
SHOW_RUNNING = ('MainPID={main}\nActiveState=active\nSubState=running\nResult=success\nExecMainCode=0\nExecMainStatus=0\n'
                'ControlGroup=/system.slice/sglang-server.service\nInvocationID=aaa\nNRestarts=0\nLoadState=loaded\n'
                'ActiveEnterTimestampMonotonic=1000\n')
SHOW_STOPPED = ('MainPID=0\nActiveState=inactive\nSubState=dead\nResult=success\nExecMainCode=0\nExecMainStatus=0\n'
                'ControlGroup=\nInvocationID=\nNRestarts=0\nLoadState=loaded\nActiveEnterTimestampMonotonic=0\n')
START_LINE = "[2025-11-30 10:00:00] server_args=ServerArgs(model_path='/shared/kimi-k2.5-int4', port=30000)\n"


class Stub(http.server.BaseHTTPRequestHandler):
    """SGLang 0.5.9's answers to the readiness contract."""
    health = 200
    model = 'kimi-k2.5'
    key = None

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self):
        if Stub.key and self.headers.get('Authorization') != 'Bearer %s' % Stub.key:
            self._send(401, {'error': 'Unauthorized'})
            return False
        return True

    def do_GET(self):  # noqa: N802 (the stdlib's name)
        if not self._authorized():
            return
        if self.path in ('/health', '/health_generate'):
            self._send(Stub.health, {})
        elif self.path == '/v1/models':
            self._send(200, {'object': 'list', 'data': [{'id': Stub.model, 'object': 'model'}]})
        elif self.path == '/model_info':
            self._send(200, {'model_path': '/shared/kimi-k2.5-int4', 'is_generation': True})
        else:
            self._send(404, {'detail': 'Not Found'})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get('Content-Length') or 0))
        if self._authorized():
            self._send(200, {'text': ' Paris.', 'meta_info': {'completion_tokens': 8}})

    def log_message(self, *args):
        pass


def serve():
    """(port, stop) of a stub SGLang server with Stub's answers, in a thread of this process."""
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Stub)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    return httpd.server_address[1], httpd.shutdown
