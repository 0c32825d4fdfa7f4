# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report of playbooks/verify.yml: raw reads per host -> rows -> a text table.

verify.yml reads each host without changing it and publishes what it read, as text, in the fact
verify_report_host (keys below). Everything here is pure: any part may be missing, empty or not
valid JSON, and then that part of the row is None (JSON null, '-' in the table); nothing raises.

Raw keys of one host (all optional):
  cuda_home, ptxas_stdout, cuda_version_json, toolkits_found (directory names cuda-X.Y)
  ml_env_path, release (target of the current link), verified_marker, verify_json, dist_infos (directory names),
  pins_json (the release's .ml_env/pins.json: the lock it was built from), lock_wanted (the SHA-256 of the
  lock the inventory's profile names, 'none' without one, 'unreadable' when it cannot be read)
  runtime_env_json, nccl_profile (the inventory's setting), nccl_profiles (profile -> vars),
  nccl_topology_map (topology summary -> profile)
  environment_seen ({differs, problems, error}: what the server's Python sees against the spec; node_info's seen_env)
  gpu (gpu_info's result, or {'failed': True, 'msg': ...})
  server_installed, server (sglang_server's state=healthy result), unit_text (the unit file)
  throughput_last_json, throughput_baseline_json
  gateway ({'host', 'status' (the HTTP status of the gateway's GET /workers, None when unreachable), 'error',
  'workers' (its list), 'url' (this node's worker URL)}; absent when the fleet has no gateway)
  tp_group ({'name', 'rank', 'nnodes', 'leader'} of a member of a multi-node TP group; absent or {} alone)
"""

from __future__ import annotations

import json
import re
import shlex

from ansible.errors import AnsibleFilterError

COLUMNS = ['host', 'toolkit', 'stack', 'release', 'lock', 'env', 'sees', 'gpus', 'topology', 'group', 'server', 'gateway', 'model',
           'tok/s']
# Shown first in the stack column, in this order; the rest is counted.
KEY_PACKAGES = ['sglang', 'torch', 'sgl-kernel', 'sglang-kernel', 'flashinfer-python']
MISSING = '-'
CELL_WIDTH = 60

PTXAS_RE = re.compile(r'release\s+([0-9]+\.[0-9]+)(?:,\s*V([0-9][0-9.]*))?')
DIST_INFO_RE = re.compile(r'^(?P<name>[A-Za-z0-9][A-Za-z0-9._]*?)-(?P<version>[0-9][^-/]*)\.dist-info\Z')
TOOLKIT_DIR_RE = re.compile(r'^cuda-([0-9]+\.[0-9]+)\Z')


def _json(text):
    """Parsed JSON of text, or None for anything missing or invalid."""
    if isinstance(text, (dict, list)):
        return text
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _text(value):
    return value.strip() if isinstance(value, str) and value.strip() else None


def normalize_name(name):
    """PEP 503 name: flashinfer_python and Flashinfer.Python are flashinfer-python."""
    return re.sub(r'[-_.]+', '-', str(name)).lower()


def _version_key(version):
    return [int(part) if part.isdigit() else 0 for part in re.split(r'[.]', version)]


# -- parts ---------------------------------------------------------------------------------------
def toolkit_part(raw):
    """{version, home, source, found} from ptxas --version, else version.json, else None."""
    home = _text(raw.get('cuda_home'))
    found = sorted({m.group(1) for m in (TOOLKIT_DIR_RE.match(str(name)) for name in raw.get('toolkits_found') or []) if m},
                   key=_version_key)
    version = source = None
    match = PTXAS_RE.search(raw.get('ptxas_stdout') or '')
    if match:
        version, source = match.group(2) or match.group(1), 'ptxas'
    else:
        data = _json(raw.get('cuda_version_json'))
        if isinstance(data, dict) and isinstance(data.get('cuda'), dict) and data['cuda'].get('version'):
            version, source = str(data['cuda']['version']), 'version.json'
    if version is None and not found:
        return None
    return {'version': version, 'home': home if version else None, 'source': source, 'found': found}


def dist_info_versions(names):
    """{normalized name: version} from site-packages directory names (name-version.dist-info)."""
    versions = {}
    for name in names or []:
        match = DIST_INFO_RE.match(str(name).rstrip('/').rsplit('/', 1)[-1])
        if match:
            versions[normalize_name(match.group('name'))] = match.group('version')
    return versions


def stack_part(raw):
    """{packages, verified, torch_cuda, drift} from the release's verification report and dist-info names.

    The pins come from .ml_env/verify.json (what the release was verified against); the versions from
    the dist-info directories installed now. drift names pins whose installed version differs."""
    report = _json(raw.get('verify_json'))
    installed = dist_info_versions(raw.get('dist_infos'))
    release = _text(raw.get('release'))
    marker = _text(raw.get('verified_marker'))
    pins = {}
    torch_cuda = None
    if isinstance(report, dict):
        for entry in report.get('packages') or []:
            if isinstance(entry, dict) and entry.get('name'):
                pins[normalize_name(entry['name'])] = entry.get('installed') or entry.get('expected')
        torch_cuda = report.get('torch_cuda')
    if not pins and not installed:
        return None
    if pins:
        packages = dict((name, installed.get(name, version)) for name, version in pins.items())
        drift = sorted(name for name, version in pins.items() if name in installed and installed[name] != version)
    else:
        packages = dict((name, installed[name]) for name in KEY_PACKAGES if name in installed)
        drift = []
    # The marker holds the hash that names the release directory (roles/ml_env/tasks/verify.yml).
    verified = bool(marker) and (release is None or release.rstrip('/').rsplit('/', 1)[-1] == marker)
    return {'packages': packages, 'verified': verified, 'torch_cuda': torch_cuda, 'drift': drift}


def env_part(raw, topology=None):
    """{profile, expected, nccl, cuda_home} from /etc/inferops/runtime-env.json.

    The spec holds variables, not the profile's name: the name is the profile whose variables are
    exactly the spec's NCCL_* variables, preferring the one the inventory asks for (a profile, or
    auto through the topology map). A spec with a `profile` field is taken at its word."""
    spec = _json(raw.get('runtime_env_json'))
    if not isinstance(spec, dict) or not isinstance(spec.get('vars'), dict):
        return None
    env_vars = spec['vars']
    nccl = dict((k, str(v)) for k, v in env_vars.items() if str(k).startswith('NCCL_'))
    profiles = raw.get('nccl_profiles') if isinstance(raw.get('nccl_profiles'), dict) else {}
    setting = _text(raw.get('nccl_profile'))
    expected = setting
    # runtime_env_topology wins over what gpu_info saw, as in the role.
    topology = _text(raw.get('nccl_topology')) or topology
    if setting == 'auto':
        by_topology = raw.get('nccl_topology_map') if isinstance(raw.get('nccl_topology_map'), dict) else {}
        expected = by_topology.get(str(topology).lower(), 'none') if topology else None
    matching = sorted(name for name, values in profiles.items()
                      if isinstance(values, dict) and dict((k, str(v)) for k, v in values.items()) == nccl)
    if _text(spec.get('profile')):
        profile = spec['profile']
    elif expected in matching:
        profile = expected
    elif matching:
        profile = matching[0]
    else:
        profile = 'custom'
    return {'profile': profile, 'expected': expected, 'nccl': nccl, 'cuda_home': env_vars.get('CUDA_HOME')}


def seen_part(raw):
    """{differs, error} of what the server's Python sees against the spec; None when it was not read."""
    seen = raw.get('environment_seen')
    if not isinstance(seen, dict):
        return None
    return {'differs': [str(item) for item in seen.get('differs') or []], 'error': _text(seen.get('error'))}


def gpus_part(raw):
    """{count, models, compute_capabilities, topology, driver, cuda_driver, reason} from gpu_info."""
    gpu = raw.get('gpu')
    if not isinstance(gpu, dict) or gpu.get('failed') or 'count' not in gpu:
        return None
    models = {}
    capabilities = []
    for entry in gpu.get('gpus') or []:
        if not isinstance(entry, dict):
            continue
        name = str(entry.get('name') or '?')
        models[name] = models.get(name, 0) + 1
        capability = entry.get('compute_capability')
        if capability and str(capability) not in capabilities:
            capabilities.append(str(capability))
    topology = gpu.get('topology') if isinstance(gpu.get('topology'), dict) else {}
    return {'count': gpu.get('count'), 'models': models, 'compute_capabilities': capabilities,
            'topology': topology.get('summary'), 'driver': gpu.get('driver_version') or None,
            'cuda_driver': gpu.get('cuda_driver_version') or None, 'reason': gpu.get('reason') or None}


def unit_model(unit_text):
    """{model_path, served_model_name} from the unit's ExecStart (roles/sglang_server/templates/unit.j2)."""
    for line in (unit_text or '').splitlines():
        if not line.startswith('ExecStart='):
            continue
        try:
            argv = shlex.split(line[len('ExecStart='):].replace('%%', '%').replace('$$', '$'))
        except ValueError:
            return {}
        found = {}
        for option, key in (('--model-path', 'model_path'), ('--served-model-name', 'served_model_name')):
            if option in argv[:-1]:
                found[key] = argv[argv.index(option) + 1]
        return found
    return {}


def server_part(raw):
    """{status, message, served_model_name, model_path}: healthy, unhealthy, not installed or unknown."""
    if raw.get('server_installed') is False:
        return {'status': 'not installed', 'message': None}
    server = raw.get('server')
    if not isinstance(server, dict):
        return None
    if server.get('ready') and not server.get('failed'):
        info = server.get('model_info') if isinstance(server.get('model_info'), dict) else {}
        return {'status': 'healthy', 'message': None, 'served_model_name': server.get('served_model_name'),
                'model_path': info.get('model_path')}
    message = str(server.get('msg') or server.get('reason') or '').strip()
    return {'status': 'unhealthy', 'message': message.splitlines()[0] if message else 'no answer'}


def model_part(raw, server):
    """{served_model_name, model_path, source}: the serving server's answer, else the unit's ExecStart."""
    if server and server.get('status') == 'healthy' and (server.get('served_model_name') or server.get('model_path')):
        return {'served_model_name': server.get('served_model_name'), 'model_path': server.get('model_path'),
                'source': 'server'}
    found = unit_model(raw.get('unit_text'))
    if not found:
        return None
    return {'served_model_name': found.get('served_model_name'), 'model_path': found.get('model_path'), 'source': 'unit'}


def throughput_part(raw):
    """throughput-last.json as written by inferops.gpu.sglang_throughput, plus the host's baseline."""
    last = _json(raw.get('throughput_last_json'))
    baseline = _json(raw.get('throughput_baseline_json'))
    if not isinstance(last, dict) or not isinstance(last.get('tokens_per_second'), (int, float)):
        return None
    keys = ('tokens_per_second', 'measured_at', 'baseline', 'baseline_source', 'ratio', 'passed', 'revision', 'release')
    part = dict((key, last.get(key)) for key in keys)
    part['host_baseline'] = baseline.get('tokens_per_second') if isinstance(baseline, dict) else None
    return part


def lock_part(raw):
    """The SHA-256 of the lock the current release was built from, 'none' for a release built without
    one, None when there is no release or its pins.json is unreadable."""
    try:
        pinset = json.loads(raw.get('pins_json') or '')
    except ValueError:
        return None
    if not isinstance(pinset, dict) or not _text(raw.get('release')):
        return None
    lock = pinset.get('lock')
    return lock if isinstance(lock, str) and lock else 'none'


def group_part(raw):
    """{name, rank, nnodes, leader} of a member of a multi-node TP group; None for a host that serves alone."""
    group = raw.get('tp_group')
    if not isinstance(group, dict) or not _text(group.get('name')) or not isinstance(group.get('rank'), int):
        return None
    return dict((key, group.get(key)) for key in ('name', 'rank', 'nnodes', 'leader'))


def gateway_part(raw):
    """{state, load, message}: how the gateway sees this node; None when the fleet has no gateway.

    state: in rotation (listed, healthy, ready), out of rotation (listed otherwise: draining, not ready,
    pending), not registered, or unknown (the gateway did not answer its worker list)."""
    gateway = raw.get('gateway')
    if not isinstance(gateway, dict):
        return None
    group = group_part(raw)
    if group and group['rank'] != 0:
        # SGLang serves HTTP on rank 0 only: the gateway knows the group through it.
        return {'state': 'through rank 0', 'load': None, 'message': group.get('leader')}
    if gateway.get('status') != 200 or not isinstance(gateway.get('workers'), list):
        error = gateway.get('error') or ('HTTP %s' % gateway.get('status') if gateway.get('status') else 'no answer')
        return {'state': 'unknown', 'load': None, 'message': '%s: %s' % (gateway.get('host'), error)}
    url = str(gateway.get('url') or '').rstrip('/')
    mine = [w for w in gateway['workers'] if isinstance(w, dict) and str(w.get('url') or '').rstrip('/') == url]
    if not mine:
        return {'state': 'not registered', 'load': None, 'message': None}
    worker = ([w for w in mine if w.get('is_healthy') and w.get('status') == 'ready'] or mine)[0]
    if worker.get('is_healthy') and worker.get('status') == 'ready':
        return {'state': 'in rotation', 'load': worker.get('load'), 'message': None}
    return {'state': 'out of rotation', 'load': worker.get('load'), 'message': worker.get('status')}


def host_row(host, raw):
    """One host's row; raw None means the host gave nothing (unreachable, or a read failed past its failed_when)."""
    if not isinstance(raw, dict):
        return {'host': host, 'reported': False, 'toolkit': None, 'stack': None, 'release': None, 'lock': None,
                'lock_wanted': None, 'env': None, 'sees': None,
                'gpus': None, 'topology': None, 'group': None, 'server': None, 'gateway': None, 'model': None,
                'throughput': None}
    gpus = gpus_part(raw)
    server = server_part(raw)
    return {
        'host': host,
        'reported': True,
        'toolkit': toolkit_part(raw),
        'stack': stack_part(raw),
        'release': _text(raw.get('release')),
        'lock': lock_part(raw),
        'lock_wanted': _text(raw.get('lock_wanted')),
        'env': env_part(raw, gpus['topology'] if gpus else None),
        'sees': seen_part(raw),
        'gpus': gpus,
        'topology': gpus['topology'] if gpus else None,
        'group': group_part(raw),
        'server': server,
        'gateway': gateway_part(raw),
        'model': model_part(raw, server),
        'throughput': throughput_part(raw),
    }


def fleet_report_rows(hosts):
    """[{host, data}] (or {host: data}) of verify.yml -> one structured row per host, in the given order, but the
    members of a TP group together, by rank, where its first member came."""
    if isinstance(hosts, dict):
        hosts = [{'host': name, 'data': data} for name, data in hosts.items()]
    rows = [host_row(str(entry.get('host')), entry.get('data')) for entry in hosts or [] if isinstance(entry, dict)]
    members = {}
    for row in rows:
        if row.get('group'):
            members.setdefault(row['group']['name'], []).append(row)
    ordered, placed = [], set()
    for row in rows:
        if id(row) in placed:
            continue
        together = sorted(members[row['group']['name']], key=lambda one: one['group']['rank']) if row.get('group') else [row]
        ordered.extend(together)
        placed.update(id(one) for one in together)
    return ordered


# -- table ---------------------------------------------------------------------------------------
def _short_gpu_name(name):
    return re.sub(r'^NVIDIA\s+', '', name)


def _number(value):
    return ('%.1f' % value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def row_cells(row):
    """The table's text for one row, '-' for every missing part."""
    cells = {'host': row.get('host') or MISSING}
    if not row.get('reported', True):
        cells.update((column, MISSING) for column in COLUMNS[1:])
        cells['server'] = 'no report: unreachable or failed'
        return cells
    toolkit = row.get('toolkit')
    if toolkit and toolkit.get('version'):
        cells['toolkit'] = toolkit['version']
    elif toolkit and toolkit.get('found'):
        cells['toolkit'] = '- (found %s)' % ', '.join(toolkit['found'])
    stack = row.get('stack')
    if stack:
        packages = stack.get('packages') or {}
        shown = [name for name in KEY_PACKAGES if name in packages] or sorted(packages)[:3]
        text = ', '.join('%s %s' % (name, packages[name]) for name in shown)
        if len(packages) > len(shown):
            text += ' (+%d)' % (len(packages) - len(shown))
        if not stack.get('verified'):
            text += ' UNVERIFIED'
        if stack.get('drift'):
            text += ' DRIFT: %s' % ', '.join(stack['drift'])
        cells['stack'] = text or MISSING
    if row.get('release'):
        cells['release'] = row['release'].rstrip('/').rsplit('/', 1)[-1]
    if row.get('lock'):
        wanted = row.get('lock_wanted')
        cells['lock'] = row['lock'][:12] + (' (want %s)' % wanted[:12] if wanted and wanted != row['lock'] else '')
    env = row.get('env')
    if env:
        cells['env'] = env['profile'] + (' (want %s)' % env['expected']
                                         if env.get('expected') and env['expected'] != env['profile'] else '')
    sees = row.get('sees')
    if sees:
        cells['sees'] = ('; '.join(sees['differs']) if sees['differs']
                         else 'not read: %s' % sees['error'] if sees['error'] else 'spec')
    gpus = row.get('gpus')
    if gpus:
        if gpus.get('count'):
            models = ', '.join('%dx %s' % (n, _short_gpu_name(name)) for name, n in sorted(gpus['models'].items()))
            capabilities = '/'.join(gpus.get('compute_capabilities') or [])
            cells['gpus'] = models + (' cc %s' % capabilities if capabilities else '')
        else:
            cells['gpus'] = '0'
        cells['topology'] = gpus.get('topology') or MISSING
    group = row.get('group')
    if group:
        cells['group'] = '%s rank %s/%s' % (group['name'], group['rank'], group.get('nnodes') or '?')
    server = row.get('server')
    if server:
        cells['server'] = server['status'] + (': %s' % server['message'] if server.get('message') else '')
    gateway = row.get('gateway')
    if gateway:
        cells['gateway'] = gateway['state'] + (': %s' % gateway['message'] if gateway.get('message') else '')
    model = row.get('model')
    if model:
        name, path = model.get('served_model_name'), model.get('model_path')
        cells['model'] = ('%s (%s)' % (name, path) if name and path and name != path else name or path) or MISSING
    throughput = row.get('throughput')
    if throughput:
        text = _number(throughput['tokens_per_second'])
        if isinstance(throughput.get('ratio'), (int, float)):
            text += ' (%.2f of %s' % (throughput['ratio'], _number(throughput.get('baseline')))
            text += ', %s)' % ('passed' if throughput.get('passed') else 'FAILED')
        elif throughput.get('passed') is False:
            text += ' (FAILED)'
        cells['tok/s'] = text
    return dict((column, cells.get(column, MISSING)) for column in COLUMNS)


def _clip(text, width):
    text = ' '.join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + '...'


def fleet_report_table(rows, columns=None, width=CELL_WIDTH):
    """Rows of fleet_report_rows -> aligned text lines: a header, a rule of =, one line per host.

    Not -: YAML output would quote a line that starts with it."""
    columns = list(columns or COLUMNS)
    unknown = [column for column in columns if column not in COLUMNS]
    if unknown:
        raise AnsibleFilterError('fleet_report_table: unknown column(s) %s; allowed: %s' % (', '.join(unknown), ', '.join(COLUMNS)))
    cells = [dict((column, _clip(value, int(width))) for column, value in row_cells(row).items()) for row in rows or []]
    widths = dict((column, max([len(column)] + [len(line[column]) for line in cells])) for column in columns)
    lines = ['  '.join(column.ljust(widths[column]) for column in columns).rstrip(),
             '  '.join('=' * widths[column] for column in columns)]
    lines += ['  '.join(line[column].ljust(widths[column]) for column in columns).rstrip() for line in cells]
    # One lock for the fleet: a node whose release came from another lock runs other bytes.
    locks = sorted(set(row['lock'] for row in rows or [] if row.get('lock')))
    if len(locks) > 1:
        lines.append('Not one lock: ' + '; '.join(
            '%s on %s' % (', '.join(row['host'] for row in rows if row.get('lock') == lock), lock[:12]) for lock in locks))
    return lines


class FilterModule(object):
    """The fleet report's filters."""

    def filters(self):
        return {
            'fleet_report_rows': fleet_report_rows,
            'fleet_report_table': fleet_report_table,
        }
