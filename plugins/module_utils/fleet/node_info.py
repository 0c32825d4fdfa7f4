# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the fleet report shows of one node, read in one call (inferops.gpu.node_info, playbooks/verify.yml).

``read_node`` returns the raw parts ``plugins/filter/fleet_report.py`` turns into a row, under the
names its docstring lists, as text where the filter parses text (a file that is not JSON is a '-' in
the table, never a failure):

- the CUDA toolkit: ``ptxas --version`` of ``cuda_home`` (run only when it is an executable file),
  else its ``version.json``, and the ``cuda-*`` directories beside it (under ``cuda_toolkit_root``);
- the ml-env: the release the ``ml_env_path`` link resolves to, its ``.verified`` marker,
  ``.ml_env/verify.json`` and ``.ml_env/pins.json``, and the ``*.dist-info`` directory names under
  ``<release>/lib`` (three levels down: ``pythonX.Y/site-packages/<name>``);
- runtime_env's spec (JSON), the GPUs (``gpu_facts``, as ``inferops.gpu.gpu_info`` collects them,
  without the processes);
- the server: whether its ``--config`` file is there (the role writes it for either manager; without
  it the server was never set up here, and nothing more is asked), its unit file (systemd), and what
  ``inferops.gpu.sglang_server`` ``state=healthy`` answers in check mode: the same managers,
  ``Operations.healthy`` and readiness probe (``module_utils/sglang``), never creating anything;
- the throughput gate's last measurement and the host's baseline (``state_dir``);
- what the server's Python sees against runtime_env's spec, started as its unit starts it (``seen_env.py``).

Every part is optional (an empty setting reads nothing) and no read fails the call: what a node
lacks, or a read that fails, is empty ('' / [] / {}), and the report shows '-'. The node comes in
through ``Host`` (files, directories, bounded commands, HTTP, GPU facts), so the tests run it on a
temporary directory laid out like a provisioned node, with recorded tool outputs and a stub server.
"""

from __future__ import annotations

import fnmatch
import os
import stat as stat_module

from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout
from ansible_collections.inferops.gpu.plugins.module_utils.fleet.seen_env import seen_part
from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.release import MARKER, RECORDS, REPORT
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.launch import LaunchError, ProcessManager, SystemdManager
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.load import BASELINE_FILE, LAST_FILE
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.ops import OperationFailed, Operations
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.probe import Probe, check_follower, check_ready
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.server_module import ready_line_since_last_start

# The pin set a release was built from (roles/ml_env/tasks/build.yml writes it beside verify.json).
PINS = 'pins.json'
# The process manager's pidfile in run_dir, as module_utils/sglang/server_module.py names it.
PIDFILE = 'sglang-server.pid'
# What the report keeps of the server's answer (the filter reads these).
SERVER_KEYS = ('ready', 'msg', 'reason', 'cause', 'served_model_name', 'model_info')
# dist-info directories sit at <release>/lib/pythonX.Y/site-packages/<name>.dist-info.
DIST_INFO_DEPTH = 3


def _no_clamp(seconds):
    return seconds


class Host:
    """The node as the report reads it.

    run: a bounded run_command (argv -> (rc, out, err), raises CommandTimeout); http: (method, url,
    headers, body, timeout) -> (status or None, text, error); gpu_facts: () -> gpu_info's facts (may
    raise CommandTimeout)."""

    def __init__(self, run, http, gpu_facts, proc='/proc', setpriv='setpriv'):
        self.setpriv = setpriv
        self.run = run
        self.http = http
        self.gpu_facts = gpu_facts
        self.proc = proc

    def read_text(self, path):
        """The file's text (undecodable bytes replaced), or None when it cannot be read."""
        try:
            with open(path, 'rb') as handle:
                return handle.read().decode('utf-8', 'replace')
        except (IOError, OSError):
            return None

    def lexists(self, path):
        return os.path.lexists(path)

    def link_target(self, path):
        """Where a symlink at `path` resolves to (as the stat module's lnk_source), None when it is no link."""
        return os.path.realpath(path) if os.path.islink(path) else None

    def executable_file(self, path):
        return os.path.isfile(path) and os.access(path, os.X_OK)

    def directories(self, top, pattern, depth):
        """Names of the directories matching `pattern` at most `depth` levels under `top`, as the find
        module lists them (file_type directory, not hidden, links not followed), in walk order."""
        found = []
        if not os.path.isdir(top):
            return found
        base = top.rstrip(os.sep) + os.sep
        for root, dirs, files in os.walk(top, followlinks=False):
            for name in files + dirs:
                path = os.path.normpath(os.path.join(root, name))
                if path.count(os.sep) - base.count(os.sep) + 1 > depth:
                    del dirs[:]
                    continue
                if name.startswith('.') or not fnmatch.fnmatch(name, pattern):
                    continue
                try:
                    if stat_module.S_ISDIR(os.lstat(path).st_mode):
                        found.append(name)
                except OSError:
                    continue
        return found

    def manager(self, server):
        """The server's manager, as the sglang_server module builds it."""
        if server.get('manager') == 'process':
            return ProcessManager(os.path.join(server['run_dir'], PIDFILE), proc=self.proc)
        return SystemdManager(server['unit'], self.run, proc=self.proc)


def _text(host, path):
    return (host.read_text(path) or '') if path else ''


def toolkit(host, cuda_home, root):
    """ptxas --version of the toolkit (or its version.json when ptxas did not answer) and the toolkits beside it."""
    part = {'cuda_home': cuda_home or '', 'ptxas_stdout': '', 'cuda_version_json': '', 'toolkits_found': []}
    if cuda_home:
        ptxas = os.path.join(cuda_home, 'bin', 'ptxas')
        rc, out = None, ''
        if host.executable_file(ptxas):
            try:
                rc, out, dummy = host.run([ptxas, '--version'])
            except CommandTimeout:
                rc, out = None, ''
        if rc == 0:
            part['ptxas_stdout'] = out or ''
        else:
            part['cuda_version_json'] = _text(host, os.path.join(cuda_home, 'version.json'))
    if root:
        part['toolkits_found'] = host.directories(root, 'cuda-*', 1)
    return part


def ml_env(host, path):
    """The release behind the ml-env link, its marker, verification report, pin set and installed distributions."""
    release = (host.link_target(path) or '') if path else ''
    part = {'ml_env_path': path or '', 'release': release, 'verified_marker': '', 'verify_json': '', 'pins_json': '',
            'dist_infos': []}
    if release:
        part['verified_marker'] = _text(host, os.path.join(release, MARKER))
        part['verify_json'] = _text(host, os.path.join(release, RECORDS, REPORT))
        part['pins_json'] = _text(host, os.path.join(release, RECORDS, PINS))
        part['dist_infos'] = host.directories(os.path.join(release, 'lib'), '*.dist-info', DIST_INFO_DEPTH)
    return part


def gpus(host):
    """gpu_info's facts without the processes, or {'failed': True, 'msg'} when nvidia-smi hung."""
    try:
        facts = dict(host.gpu_facts())
    except CommandTimeout as exc:
        return {'failed': True, 'msg': '%s; a GPU that fell off the bus makes nvidia-smi hang: look for Xid 79 in the '
                                       'kernel log' % exc}
    facts.pop('processes', None)
    return facts


def server_health(host, server):
    """What inferops.gpu.sglang_server state=healthy answers in check mode, reduced to SERVER_KEYS: ready, with
    served_model_name and model_info; or not ready, with msg (and cause)."""
    manager = host.manager(server)

    # As module_utils/sglang/server_module.py's health(): a follower (--node-rank >= 1) answers /health only; the
    # ready line counts as seen when this run passed the gate before, or the log says so, or cannot tell.
    def health(served):
        probe = Probe(host.http, server['host'], server['port'], api_key=server.get('api_key') or None)
        if not server.get('probe', True):
            ready, reason, dummy = check_follower(probe, _no_clamp)
            return ready, reason, probe
        seen = served or ready_line_since_last_start(server['log_path']) is not False
        skip_line = server.get('skip_warmup') or not server.get('ready_line', True)
        ready, reason, dummy = check_ready(probe, _no_clamp, seen, skip_line, server.get('served_model_name') or None)
        return ready, reason, probe

    ops = Operations(manager, None, health, None, server['run_dir'], check_mode=True)
    try:
        result = ops.healthy()
    except OperationFailed as exc:
        result = exc.result
    except (LaunchError, CommandTimeout) as exc:
        result = {'ready': False, 'msg': str(exc), 'cause': 'launch'}
    return dict((key, result[key]) for key in SERVER_KEYS if key in result)


def server_part(host, server):
    """{server_installed, server, unit_text}; without settings (server not read) both are None: '-' in the report."""
    if not server:
        return {'server_installed': None, 'server': None, 'unit_text': ''}
    config = server.get('config') or ''
    installed = bool(config) and host.lexists(config)
    part = {'server_installed': installed, 'server': {}, 'unit_text': ''}
    if server.get('manager', 'systemd') == 'systemd':
        part['unit_text'] = _text(host, server.get('unit_file'))
    if installed:
        part['server'] = server_health(host, server)
    return part


def throughput(host, state_dir):
    if not state_dir:
        return {'throughput_last_json': '', 'throughput_baseline_json': ''}
    return {'throughput_last_json': _text(host, os.path.join(state_dir, LAST_FILE)),
            'throughput_baseline_json': _text(host, os.path.join(state_dir, BASELINE_FILE))}


def read_node(host, params):
    """Every part of the node, keyed as fleet_report_rows reads them.

    params: cuda_home, cuda_toolkit_root, ml_env_path, runtime_env_spec, gpu (bool), state_dir and
    server ({config, manager, unit, unit_file, log_path, run_dir, host, port, api_key, served_model_name,
    skip_warmup, ready_line, probe})."""
    found = {}
    found.update(toolkit(host, params.get('cuda_home'), params.get('cuda_toolkit_root')))
    found.update(ml_env(host, params.get('ml_env_path')))
    found['runtime_env_json'] = _text(host, params.get('runtime_env_spec'))
    found['gpu'] = gpus(host) if params.get('gpu', True) else {}
    found.update(server_part(host, params.get('server') or {}))
    # What the server's Python sees, started as its unit starts it (a unit that never served is not asked).
    found.update(seen_part(host, found['unit_text'] if found['server_installed'] else '', found['runtime_env_json'],
                           host.setpriv))
    found.update(throughput(host, params.get('state_dir')))
    return found
