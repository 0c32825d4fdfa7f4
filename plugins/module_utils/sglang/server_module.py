# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wiring of the sglang_server module: the real transport, clocks and managers behind Operations."""

from __future__ import annotations

import os

from ansible.module_utils.urls import open_url
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout
from ansible_collections.inferops.gpu.plugins.module_utils.gpu.facts import collect_gpu_facts
from ansible_collections.inferops.gpu.plugins.module_utils._common.local_http import request as plain_http_request
from ansible_collections.inferops.gpu.plugins.module_utils.sglang import foreign
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.gate import Gate
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.launch import ProcessManager, SystemdManager
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.ops import Operations
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.probe import Probe, check_follower, check_ready
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.watch import (
    READY_LINE, LogFollower, ProgressFile, find_last_start,
)


def http(method, url, headers, body, timeout):
    """(status, text, error) of one request; the server is local, so proxies are never used."""
    if url.startswith('http://'):
        return plain_http_request(method, url, headers, body, timeout)
    try:
        response = open_url(url, method=method, headers=headers, data=body, timeout=timeout, use_proxy=False,
                            validate_certs=False, follow_redirects='none')
        return response.getcode(), response.read().decode('utf-8', 'replace'), None
    except HTTPError as exc:
        try:
            text = exc.read().decode('utf-8', 'replace')
        except Exception:  # pylint: disable=broad-except
            text = ''
        return exc.code, text, None
    except (URLError, OSError, ValueError) as exc:
        return None, '', str(getattr(exc, 'reason', exc))
    except Exception as exc:  # pylint: disable=broad-except
        # http.client raises RemoteDisconnected / BadStatusLine when a dying server drops the socket.
        return None, '', '%s: %s' % (type(exc).__name__, exc)


def ready_line_since_last_start(path):
    """Whether the last start recorded in the log reached the ready line: True, False, or None when
    the log holds no start at all (rotated since, or a log level that prints neither line): then the
    log cannot tell, and the HTTP contract alone decides (/health_generate answers 503 until the
    warmup passed)."""
    offset = find_last_start(path)
    if offset is None:
        return None
    try:
        with open(path, 'rb') as handle:
            handle.seek(offset)
            for line in handle:
                if READY_LINE.encode() in line:
                    return True
    except (IOError, OSError):
        return None
    return False


def gpu_processes_reader(module, run):
    def read():
        try:
            facts = collect_gpu_facts(run, module.get_bin_path, warn=module.warn)
        except CommandTimeout as exc:
            module.warn('GPU memory release not checked: %s' % exc)
            return None
        if facts.get('backend') == 'none':
            return None
        return facts.get('processes', [])
    return read


def _replace(servers):
    """(pids, stop) of the servers started by hand a start takes over, or None."""
    if not servers:
        return None
    return sorted(int(server['pid']) for server in servers), lambda timeout: foreign.stop(servers, timeout)


def build_operations(module, params, run):
    """(Operations, paths) for the module's parameters."""
    run_dir = params['run_dir']
    if not module.check_mode and not os.path.isdir(run_dir):
        os.makedirs(run_dir, 0o750)
    paths = {'log_path': params['log_path'], 'progress_path': os.path.join(run_dir, 'progress.json')}
    secrets = [params['api_key']] if params['api_key'] else []

    if params['manager'] == 'systemd':
        manager = SystemdManager(params['unit'], run)
    else:
        manager = ProcessManager(os.path.join(run_dir, 'sglang-server.pid'), command=params['command'],
                                 environment=params['environment'], environment_files=params['environment_files'],
                                 chdir=params['chdir'],
                                 log_path=params['log_path'])

    def new_probe():
        return Probe(http, params['host'], params['port'], api_key=params['api_key'],
                     health_timeout=params['health_timeout'], max_tokens=params['generate_max_tokens'])

    def ready_line_seen(served):
        """The ready line as the gate counts it for a running server: this run passed the gate before
        (served), or its log says so, or the log cannot tell (None) and HTTP decides."""
        return served or ready_line_since_last_start(params['log_path']) is not False

    # With --log-level warning (or above) SGLang prints no INFO line, the ready line included; its
    # /health_generate answers 503 until the warmup passed, so HTTP alone decides there.
    skip_line = params['skip_warmup'] or not params['ready_line']

    def gate(attach, served=False):
        # A fresh start is read from the current end of the log; a running one from its last start
        # line, or, when the log holds none (rotated, or a log level that hides it), from its end:
        # the lines of earlier starts must not fail a server that runs well.
        offset = find_last_start(params['log_path']) if attach else None
        log = LogFollower(params['log_path'], offset=offset, tail_lines=params['log_tail_lines'], secrets=secrets)
        if attach:
            manager.attach()
        progress = ProgressFile(paths['progress_path'], revision=(params.get('revision') or '').strip() or None)
        return Gate(manager, log, new_probe(), progress, params['host'], params['port'],
                    timeout=params['timeout'], stall_timeout=params['stall_timeout'],
                    poll_interval=params['poll_interval'], skip_warmup=skip_line,
                    expected_name=params['served_model_name'], do_probe=params['probe'],
                    ready_line_seen=attach and ready_line_seen(served),
                    # A fresh follower must log its dummy health server's line; a running one answered before.
                    follower_line_seen=attach or not params['ready_line'])

    def health(served=False):
        probe = new_probe()
        if not params['probe']:
            ready, reason, dummy = check_follower(probe, lambda s: s)
            return ready, reason, probe
        ready, reason, dummy = check_ready(probe, lambda s: s, ready_line_seen(served), skip_line,
                                           params['served_model_name'])
        return ready, reason, probe

    ops = Operations(manager, gate, health, gpu_processes_reader(module, run), run_dir,
                     check_mode=module.check_mode, revision=params['revision'],
                     stop_timeout=params['stop_timeout'], gpu_release_timeout=params['gpu_release_timeout'],
                     replace=_replace(params.get('replace')))
    return ops, paths
