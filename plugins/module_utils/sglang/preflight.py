# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks to pass before SGLang is (re)started, each failure one line naming the subject, the bad
value and the fix.

Every check returns (status, reason, problems): status ok, failed or skipped; problems is empty
unless it failed. What the checks read from the host (files, accounts, /proc, the resolver, GPU
facts) comes through System and the arguments, so the tests run on fake trees and recorded
nvidia-smi output. The fixes name the sglang_server role's variables, its main user.
"""

from __future__ import annotations

import collections
import grp
import os
import pwd
import stat as stat_module

from ansible_collections.inferops.gpu.plugins.module_utils.gpu import health_checks as gpu_health_checks
from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs
from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout

CHECKS = ('model_path', 'gpu_count', 'gpu_clean', 'port', 'log_dir', 'release')
OK, FAILED, SKIPPED = 'ok', 'failed', 'skipped'
NO_GPU_BACKEND = 'no nvidia-smi/NVML'
VERIFIED_MARKER = '.verified'
# Long command lines (a launch with 30 arguments) would drown the message.
CMDLINE_MAX = 160
R, W, X = 4, 2, 1

Account = collections.namedtuple('Account', 'name uid gid gids')


class System:
    """The host as the checks see it; tests replace attributes."""

    proc = procfs.PROC
    stat = staticmethod(os.stat)
    statvfs = staticmethod(os.statvfs)
    realpath = staticmethod(os.path.realpath)
    getpwnam = staticmethod(pwd.getpwnam)
    getpwuid = staticmethod(pwd.getpwuid)
    getgrgid = staticmethod(grp.getgrgid)
    getgrall = staticmethod(grp.getgrall)
    geteuid = staticmethod(os.geteuid)
    host_addresses = staticmethod(procfs.host_addresses)


def ok(reason):
    return OK, reason, []


def skipped(reason):
    return SKIPPED, reason, []


def failed(problems):
    return FAILED, ' | '.join(problems), list(problems)


def plural(count, word):
    return '%d %s%s' % (count, word, '' if count == 1 else 's')


def one_line(text, limit=CMDLINE_MAX):
    text = ' '.join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + '...'


# accounts and permissions

def lookup_account(name, system):
    """The Account of user name (its primary and supplementary groups); KeyError when unknown."""
    entry = system.getpwnam(name)
    gids = set([entry.pw_gid])
    gids.update(group.gr_gid for group in system.getgrall() if name in group.gr_mem)
    return Account(name, entry.pw_uid, entry.pw_gid, frozenset(gids))


def current_account(system):
    uid = system.geteuid()
    try:
        return lookup_account(system.getpwuid(uid).pw_name, system)
    except KeyError:
        return Account(str(uid), uid, None, frozenset())


def user_name(uid, system):
    try:
        return system.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def group_name(gid, system):
    try:
        return system.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def describe_account(account, system):
    groups = ', '.join(group_name(gid, system) for gid in sorted(account.gids))
    return 'user %s (uid %d, groups %s)' % (account.name, account.uid, groups or 'none')


def describe_owner(st, system):
    return 'owner %s:%s, mode %04o' % (user_name(st.st_uid, system), group_name(st.st_gid, system),
                                       stat_module.S_IMODE(st.st_mode))


def permitted(st, account, need):
    """Whether account gets the need bits (R|W|X) on a directory or file from its mode; the first of
    owner, group and other that applies decides, as in the kernel. POSIX ACLs are not read."""
    if account.uid == 0:
        return True
    if st.st_uid == account.uid:
        bits = st.st_mode >> 6
    elif st.st_gid in account.gids:
        bits = st.st_mode >> 3
    else:
        bits = st.st_mode
    return bits & need == need


def ancestors(path):
    """'/', '/a', '/a/b' for '/a/b/c'."""
    parts = [part for part in path.split('/') if part]
    return ['/'] + ['/' + '/'.join(parts[:i]) for i in range(1, len(parts))]


def access_denial(path, account, need, system):
    """None when account may search every directory above path and has need on path itself;
    otherwise which of them stops it, with its owner and mode."""
    real = system.realpath(path)
    for directory in ancestors(real) + [real]:
        try:
            st = system.stat(directory)
        except OSError as exc:
            return '%s cannot be examined (%s)' % (directory, exc.strerror or exc)
        if directory != real and not permitted(st, account, X):
            return '%s (%s) does not let it search' % (directory, describe_owner(st, system))
    if not permitted(st, account, need):
        what = {R | X: 'read', R: 'read', W | X: 'write'}[need]
        return '%s (%s) does not let it %s' % (real, describe_owner(st, system), what)
    return None


def resolve_user(user, system):
    """(Account, None) or (None, the problem naming the user)."""
    if not user:
        return current_account(system), None
    try:
        return lookup_account(user, system), None
    except KeyError:
        return None, ('user %s does not exist; create it (the sglang_server role does) or set sglang_server_user'
                      % user)


# the checks

def check_model_path(model_path, account, system):
    """An absolute model path must exist and be readable by the service user; anything else is a
    Hugging Face hub id, which SGLang downloads and this check cannot see."""
    if not model_path:
        return skipped('model_path not given')
    if not os.path.isabs(model_path):
        return skipped('%s is not an absolute path: taken as a Hugging Face hub id, not checked' % model_path)
    try:
        st = system.stat(model_path)
    except FileNotFoundError:
        return failed(['model_path %s does not exist; put the model there or set sglang_server_model_path to a '
                       'local model directory or a Hugging Face hub id' % model_path])
    except OSError as exc:
        return failed(['model_path %s cannot be read: %s; fix its permissions or set sglang_server_model_path'
                       % (model_path, exc.strerror or exc)])
    if account is None:
        return ok('%s exists (its readability was not checked: the user does not exist)' % model_path)
    # A GGUF model is one file; a Hugging Face layout is a directory to list and enter.
    need = R | X if stat_module.S_ISDIR(st.st_mode) else R
    denial = access_denial(model_path, account, need, system)
    if denial:
        return failed(['model_path %s is not readable by %s: %s; give it access (chgrp/chmod) or move the model'
                       % (model_path, describe_account(account, system), denial)])
    return ok('%s exists and user %s can read it' % (model_path, account.name))


def check_gpu_count(tp, pp, count, source, nnodes=1):
    needed = tp * pp // nnodes
    summary = 'tp %d x pp %d%s = %s needed, %d found (%s)' % (
        tp, pp, ' / %d nodes' % nnodes if nnodes > 1 else '', plural(needed, 'GPU'), count, source)
    if needed <= count:
        return ok(summary)
    if count == 0:
        fix = ('install or repair the NVIDIA driver, or list gpu_count and gpu_clean in sglang_server_preflight_ignore '
               'on a host without GPUs')
    else:
        fix = 'lower --tp/--pp in sglang_server_args or run on a host with %s' % plural(needed, 'GPU')
    return failed(['%s; %s' % (summary, fix)])


def gpus_in_use(gpus, needed):
    """Indices of the GPUs the server would use: the first `needed` in NVML order (CUDA's order on
    hosts of identical GPUs), all of them when it needs as many or more."""
    indices = sorted(gpu['index'] for gpu in gpus)
    return indices if needed >= len(indices) else indices[:needed]


def annotate_processes(processes, own, describe):
    annotated = []
    for process in processes:
        entry = dict(process)
        entry['cmdline'] = describe(process['pid'])
        entry['own'] = process['pid'] in own
        annotated.append(entry)
    return annotated


def check_gpu_clean(facts, needed, processes, threshold):
    """No foreign compute process and at most threshold MiB not held by the server itself on the
    GPUs the server would use: gpu_health's check, with this role's fixes. processes:
    annotate_processes() of the facts' processes."""
    if facts['backend'] == 'none':
        return skipped(NO_GPU_BACKEND)
    if not facts['gpus']:
        return skipped(facts['reason'] or 'no GPU reported')
    outcome = gpu_health_checks.check_gpu_clean(
        facts['gpus'], processes, gpus_in_use(facts['gpus'], needed), threshold,
        fix='stop it or free the GPU before starting SGLang',
        threshold_fix='free the GPU or raise sglang_server_preflight_gpu_memory_threshold_mib')
    if outcome['status'] == gpu_health_checks.FAIL:
        return failed(outcome['problems'])
    return ok(outcome['summary'])


def check_port(port, host, holders, as_root=True):
    """The port is free on host, or held only by the server itself. holders: procfs.listeners()
    entries with 'own' added. as_root: whether every process's descriptors could be read."""
    if not 1 <= port <= 65535:
        return failed(['port %d is not a TCP port (1-65535); set sglang_server_port to a free port' % port])
    foreign = [holder for holder in holders if not holder['own']]
    if foreign:
        named = []
        unseen = 'in another PID namespace, a container?' if as_root else 'run this as root to name it'
        for holder in foreign:
            where = '' if holder['address'] == host else ' listening on %s' % holder['address']
            if holder['pid'] is None:
                named.append('a process this module cannot see%s (%s)' % (where, unseen))
            else:
                command = one_line(holder['cmdline']) or 'command line not visible'
                named.append('PID %d (%s)%s' % (holder['pid'], command, where))
        return failed(['port %d on %s is held by %s; free it or set sglang_server_port'
                       % (port, host, ', '.join(named))])
    if holders:
        return ok('port %d on %s is held by the server itself (PID %s)'
                  % (port, host, ', '.join(str(h['pid']) for h in holders)))
    return ok('port %d on %s is free' % (port, host))


def check_log_dir(log_dir, account, system):
    if not log_dir:
        return skipped('log_dir not given')
    try:
        st = system.stat(log_dir)
    except FileNotFoundError:
        return failed(['log_dir %s does not exist; create it writable by the service user (the sglang_server role '
                       'does) or set sglang_server_log_dir' % log_dir])
    if not stat_module.S_ISDIR(st.st_mode):
        return failed(['log_dir %s is not a directory; remove it or set sglang_server_log_dir' % log_dir])
    try:
        if system.statvfs(log_dir).f_flag & os.ST_RDONLY:
            return failed(['log_dir %s is on a read-only filesystem; set sglang_server_log_dir to a writable '
                           'place' % log_dir])
    except OSError:
        pass  # statvfs is only a refinement of the mode check below
    denial = access_denial(log_dir, account, W | X, system)
    if denial:
        return failed(['log_dir %s is not writable by %s: %s; chown it to %s or make it writable by one of its '
                       'groups' % (log_dir, describe_account(account, system), denial, account.name)])
    return ok('%s is writable by user %s' % (log_dir, account.name))


def _same_release(expected, resolved, system):
    if '/' not in expected:  # a bare release name
        return expected == os.path.basename(resolved)
    return system.realpath(expected) == resolved


def check_release(release, expected, account, system):
    """release (the current link, ml_env_path) resolves to a verified release directory, the one
    ml_env verified and published as ml_env_release."""
    if not release:
        return skipped('release not given')
    resolved = system.realpath(release)
    try:
        st = system.stat(resolved)
    except FileNotFoundError:
        where = '' if resolved == release else ' (it resolves to %s)' % resolved
        return failed(['release %s does not exist%s; run the ml_env role to build and switch to a verified release'
                       % (release, where)])
    if not stat_module.S_ISDIR(st.st_mode):
        return failed(['release %s resolves to %s which is not a directory; run the ml_env role to switch to a '
                       'verified release' % (release, resolved)])
    problems = []
    try:
        marker = stat_module.S_ISREG(system.stat(os.path.join(resolved, VERIFIED_MARKER)).st_mode)
    except FileNotFoundError:
        marker = False
    if not marker:
        problems.append('release %s resolves to %s which has no %s marker; run the ml_env role to verify it or '
                        'roll back to a verified release (ml_env_rollback)' % (release, resolved, VERIFIED_MARKER))
    if expected and not _same_release(expected, resolved, system):
        problems.append('release %s resolves to %s, not to %s, the release ml_env verified (ml_env_release); run '
                        'the ml_env role again so that both agree' % (release, resolved, expected))
    if account is not None:
        denial = access_denial(resolved, account, R | X, system)
        if denial:
            problems.append('release %s resolves to %s which %s cannot use: %s; make the release readable by it'
                            % (release, resolved, describe_account(account, system), denial))
    if problems:
        return failed(problems)
    return ok('%s resolves to the verified release %s' % (release, resolved))


# everything together

def own_process_ids(own_pids, table):
    """The server's pids and all their descendants (the TP ranks are children of the launcher)."""
    own = set(own_pids)
    for pid in own_pids:
        own.update(procfs.tree(table, pid))
    return own


def gpu_results(options, ignore, own, gpu_facts, describe):
    """({'gpu_count': ..., 'gpu_clean': ...}, annotated GPU processes); gpu_facts() is called at most
    once, and only when a check that is not ignored needs it."""
    tp, pp, nnodes = options.get('tp') or 1, options.get('pp') or 1, options.get('nnodes') or 1
    given = options.get('gpu_count')
    results = {}
    facts = None
    if gpu_facts is not None and ((given is None and 'gpu_count' not in ignore) or 'gpu_clean' not in ignore):
        try:
            facts = gpu_facts()
        except CommandTimeout as exc:
            message = '%s; a GPU that fell off the bus makes nvidia-smi hang: look for Xid 79 in the kernel log' % exc
            # One problem, under the check that needed the facts most.
            first, second = ('gpu_clean', 'gpu_count') if 'gpu_clean' not in ignore else ('gpu_count', 'gpu_clean')
            results[first] = failed([message])
            results[second] = skipped('GPU facts could not be collected (see %s)' % first)
    processes = annotate_processes(facts['processes'], own, describe) if facts is not None else []
    if given is not None:
        results['gpu_count'] = check_gpu_count(tp, pp, given, 'gpu_count', nnodes)
    elif facts is not None:
        source = 'gpu_info' if facts['backend'] != 'none' else 'gpu_info: %s: %s' % (NO_GPU_BACKEND, facts['reason'])
        results['gpu_count'] = check_gpu_count(tp, pp, facts['count'], source, nnodes)
    if facts is not None:
        results['gpu_clean'] = check_gpu_clean(facts, tp * pp // nnodes, processes, options.get('gpu_memory_threshold_mib', 1024))
    for name in ('gpu_count', 'gpu_clean'):
        results.setdefault(name, skipped('GPU facts not collected'))
    return results, processes


def port_result(options, own, system):
    """(the port check, the holders of the port with 'own' added)."""
    host, port = options.get('host') or '', options['port']
    try:
        addresses = system.host_addresses(host)
    except ValueError as exc:
        return failed(['host %s; set sglang_server_host to an address of this host' % exc]), []
    holders = procfs.listeners(port, addresses, system.proc) if 1 <= port <= 65535 else []
    for holder in holders:
        holder['own'] = holder['pid'] in own
    return check_port(port, host or 'all addresses', holders, system.geteuid() == 0), holders


def preflight(options, gpu_facts=None, system=None):
    """Run every check. options: the module's parameters. gpu_facts() -> collect_gpu_facts()'s result.

    Returns {'problems', 'checks', 'gpu_processes', 'port_holders'}.
    """
    system = system or System()
    ignore = set(options.get('ignore') or [])
    own = own_process_ids(options.get('own_pids') or [], procfs.process_table(system.proc))

    account, user_problem = resolve_user(options.get('user'), system)
    results = {'model_path': check_model_path(options.get('model_path'), account, system)}
    # A service user that does not exist cannot run SGLang at all: reported here even without log_dir.
    if user_problem:
        results['log_dir'] = failed([user_problem])
    else:
        results['log_dir'] = check_log_dir(options.get('log_dir'), account, system)
    results['release'] = check_release(options.get('release'), options.get('expected_release'), account, system)
    gpu, gpu_processes = gpu_results(options, ignore, own, gpu_facts, lambda pid: procfs.cmdline(pid, system.proc))
    results.update(gpu)
    results['port'], port_holders = port_result(options, own, system)

    problems = []
    checks = {}
    for name in CHECKS:
        status, reason, found = results[name]
        if name in ignore:
            status, reason = SKIPPED, 'ignored' + (': %s' % reason if status == FAILED else '')
        else:
            problems.extend(found)
        checks[name] = {'status': status, 'reason': reason}
    return {'problems': problems, 'checks': checks, 'gpu_processes': gpu_processes, 'port_holders': port_holders}


def failure_message(problems):
    if len(problems) == 1:
        return problems[0]
    return 'SGLang preflight found %d problems: %s' % (
        len(problems), ' '.join('(%d) %s' % (i, problem) for i, problem in enumerate(problems, 1)))
