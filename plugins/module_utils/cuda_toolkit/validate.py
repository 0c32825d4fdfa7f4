# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cuda_toolkit role's input checks (input_checks.py says how they are shaped).

The argument spec has checked the types and choices; these check what it lets through: patterns
(each ends at \\Z: `$` also matches before a trailing newline), paths, one variable against
another, the architectures against what the requested CUDA version builds, and the wheel sets
with the cuda_toolkit_wheels module's own rules (plugins/module_utils/cuda_toolkit/toolkit.py), so the
role and the module refuse the same layouts and pins.
"""

from __future__ import annotations

import json
import re

from ansible_collections.inferops.gpu.plugins.module_utils.cuda_toolkit.toolkit import (
    ARCH_RE,
    COMMAND_NAME_RE,
    RELATIVE_ALLOWED,
    URL_RE,
    VERSION_RE,
    is_absolute,
    is_relative,
    layout_errors,
    wheels_errors,
)
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import (
    os_family_check,
    BOOL_ALLOWED,
    MISSING,
    as_bool,
    check,
    is_absolute_path,
    is_bool,
    is_int,
    is_list,
    is_mapping,
    is_string,
    problem,
    shown,
)
from ansible_collections.inferops.gpu.plugins.module_utils._common.network_input import RETIRED, network_problems

# The order is part of a file name in /etc/ld.so.conf.d: "50\n" once made a second file.
LDCONFIG_ORDER = re.compile(r'^[0-9]{1,3}\Z')
DEB_PACKAGE = re.compile(r'^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?\Z')
FINGERPRINT = re.compile(r'^[0-9A-F]{40}\Z')
CHECKSUM = re.compile(r'^(sha256|sha512):[0-9a-fA-F]+\Z')
WHEEL_SET_KEYS = ('nvcc', 'layout', 'wheels')
WHEEL_KEYS = ('name', 'version', 'sha256')
URL_ALLOWED = 'a URL (http, https, file)'
ABSOLUTE_ALLOWED = 'an absolute path without "." or ".." segments or control characters'
VERSION_ALLOWED = 'a quoted "major.minor" string such as "13.0", without patch level or wildcard'

NAMES = (
    'cuda_toolkit_version',
    'cuda_toolkit_method',
    'cuda_toolkit_root',
    'cuda_toolkit_ldconfig_order',
    'cuda_toolkit_ldconfig_lib_dirs',
    'cuda_toolkit_verify',
    'cuda_toolkit_verify_archs',
    'cuda_toolkit_verify_compile',
    'cuda_toolkit_command_timeout',
    'cuda_toolkit_host_compiler',
    'cuda_toolkit_host_compiler_packages',
    'inferops_proxy',
    'inferops_ca_bundle',
    'cuda_toolkit_apt_repo_url',
    'cuda_toolkit_apt_key_url',
    'cuda_toolkit_apt_key_content',
    'cuda_toolkit_apt_key_fingerprint',
    'cuda_toolkit_apt_package',
    'cuda_toolkit_pip_index_url',
    'cuda_toolkit_find_links',
    'cuda_toolkit_pip_venv',
    'cuda_toolkit_wheel_sets',
    'cuda_toolkit_runfile_url',
    'cuda_toolkit_runfile_path',
    'cuda_toolkit_runfile_checksum',
    'cuda_toolkit_runfile_download_dir',
    '__cuda_toolkit_os_family',
    '__cuda_toolkit_os_families',
    '__cuda_toolkit_supported_archs',
    '__cuda_toolkit_wheel_sets',
    '__cuda_toolkit_wheel_layouts',
    '__cuda_toolkit_apt_distro',
    '__cuda_toolkit_apt_distros',
    '__cuda_toolkit_apt_arch_dirs',
    'ansible_facts',
    'inventory_hostname',
) + tuple(sorted(RETIRED))


def _strings(value, ok):
    """A list whose every item is a string that ok() accepts."""
    return is_list(value) and all(isinstance(item, str) and ok(item) for item in value)


def _version_ok(value):
    return isinstance(value, str) and bool(VERSION_RE.match(value))


check_os_family = os_family_check('cuda_toolkit')


def check_version(values, probes):
    return check('cuda_toolkit_version', values, _version_ok, VERSION_ALLOWED)


def check_paths(values, probes):
    # Relative paths would depend on the connection's working directory; "." and ".." segments and
    # control characters have no place in a path the role creates or links.
    found = []
    for name in ('cuda_toolkit_root', 'cuda_toolkit_pip_venv', 'cuda_toolkit_runfile_download_dir'):
        found += check(name, values, is_absolute_path, ABSOLUTE_ALLOWED)
    found += check('cuda_toolkit_runfile_path', values, lambda v: v == '' or is_absolute_path(v),
                   '"" or ' + ABSOLUTE_ALLOWED)
    return found


def check_ldconfig(values, probes):
    found = check('cuda_toolkit_ldconfig_order', values,
                  lambda v: not isinstance(v, bool) and isinstance(v, (str, int)) and LDCONFIG_ORDER.match(str(v)),
                  '1 to 3 digits, such as "50" (a part of the file name in /etc/ld.so.conf.d)')
    found += check('cuda_toolkit_ldconfig_lib_dirs', values, lambda v: len(v) > 0 and _strings(v, is_relative),
                   'a non-empty list of directories relative to the toolkit directory, each ' + RELATIVE_ALLOWED)
    return found


def check_archs(values, probes):
    verify = as_bool(values['cuda_toolkit_verify'])
    return check('cuda_toolkit_verify_archs', values,
                 lambda v: _strings(v, ARCH_RE.match) and (len(v) > 0 or not verify),
                 'a list of architectures sm_XX (digits, optionally followed by a or f), non-empty when '
                 'cuda_toolkit_verify is true')


def check_supported_archs(values, probes):
    # sm_12 or sm_70 for CUDA 13.0 would otherwise fail only when nvcc runs, after the install. For a
    # version without data only the form is checked here; the toolkit refuses the rest when verified.
    archs, version = values['cuda_toolkit_verify_archs'], values['cuda_toolkit_version']
    supported = (values['__cuda_toolkit_supported_archs'] or {}).get(version) if isinstance(version, str) else None
    if (supported is None or not as_bool(values['cuda_toolkit_verify']) or values['cuda_toolkit_verify_compile'] == 'none'
            or not is_list(archs)):
        return []
    unsupported = []
    for arch in archs:
        if isinstance(arch, str) and ARCH_RE.match(arch) and arch not in supported and arch not in unsupported:
            unsupported.append(arch)
    if not unsupported:
        return []
    return [problem('cuda_toolkit_verify_archs', archs, 'architectures that CUDA %s (cuda_toolkit_version) builds, '
                    'not %s; it builds %s' % (version, shown(unsupported), ', '.join(supported)))]


def check_command_timeout(values, probes):
    return check('cuda_toolkit_command_timeout', values, lambda v: is_int(v, 1), 'a whole number of seconds, at least 1')


def check_host_compiler(values, probes):
    found = check('cuda_toolkit_host_compiler', values,
                  lambda v: v == '' or (isinstance(v, str) and COMMAND_NAME_RE.match(v)) or is_absolute_path(v),
                  '"" (g++ or gcc from PATH), a command name looked up in PATH or an absolute path')
    found += check('cuda_toolkit_host_compiler_packages', values, lambda v: _strings(v, DEB_PACKAGE.match),
                   'a list of Debian package names, optionally =version')
    return found


def check_network(values, probes):
    # The collection-wide network settings (README, "Proxy and CA"), checked as every role that
    # downloads checks them (plugins/module_utils/_common/network_input.py), so each role refuses them alone too.
    retired = [name for name in sorted(RETIRED) if values.get(name, MISSING) is not MISSING]
    proxy = values['inferops_proxy']
    ca_bundle = values['inferops_ca_bundle']
    return network_problems({} if proxy is MISSING else proxy, '' if ca_bundle is MISSING else ca_bundle, retired)


def check_ca_bundle_file(values, probes):
    # probes['ca_bundle']: validate.yml's stat of inferops_ca_bundle (follow: true). Skipped or
    # absent: no verdict; a path check_network refuses is not judged twice.
    ca_bundle, stat = values['inferops_ca_bundle'], probes.get('ca_bundle')
    if not is_mapping(stat) or stat.get('skipped') or not is_mapping(stat.get('stat')):
        return []
    if not (isinstance(ca_bundle, str) and is_absolute_path(ca_bundle)):
        return []
    if stat['stat'].get('isreg'):
        return []
    why = 'is not a regular file' if stat['stat'].get('exists') else 'does not exist'
    return [problem('inferops_ca_bundle', ca_bundle, 'a file on %s (this path %s)' % (values['inventory_hostname'], why))]


def check_wheels_method(values, probes):
    if values['cuda_toolkit_method'] != 'wheels':
        return []
    found = []
    version = values['cuda_toolkit_version']
    pinned = sorted(key for key in _all_wheel_sets(values) if isinstance(key, str))
    if _version_ok(version) and version not in pinned:
        found.append(problem('cuda_toolkit_version', version, 'one of the pinned wheel sets %s with cuda_toolkit_method '
                             'wheels (cuda_toolkit_wheel_sets adds sets)' % ', '.join(pinned)))
    found += check('cuda_toolkit_pip_index_url', values, lambda v: v == '' or (isinstance(v, str) and URL_RE.match(v)),
                   '"" (wheelhouses only) or ' + URL_ALLOWED)
    index = values['cuda_toolkit_pip_index_url']
    found += check('cuda_toolkit_find_links', values,
                   lambda v: _strings(v, lambda link: is_absolute(link) or URL_RE.match(link)) and (len(v) > 0 or index != ''),
                   'a list of absolute directories or URLs (http, https, file), non-empty when cuda_toolkit_pip_index_url is ""')
    return found


def _all_wheel_sets(values):
    """The role's pinned sets with cuda_toolkit_wheel_sets over them (vars/main.yml's __cuda_toolkit_all_wheel_sets)."""
    merged = dict(values['__cuda_toolkit_wheel_sets'] or {})
    if is_mapping(values['cuda_toolkit_wheel_sets']):
        merged.update(values['cuda_toolkit_wheel_sets'])
    return merged


def _wheel_set_problems(name, wheel_set, layouts):
    """The problems of one set, named `name` (cuda_toolkit_wheel_sets["13.0"]): its shape, then the module's rules."""
    if not is_mapping(wheel_set):
        return [problem(name, wheel_set, 'a mapping of nvcc, layout and wheels')]
    if sorted(map(str, wheel_set)) != sorted(WHEEL_SET_KEYS):
        return [problem(name, wheel_set, 'a mapping of exactly nvcc (true or false), layout (%s, or a layout mapping '
                        '{kind, merge, links, required}) and wheels (a list of {name, version, sha256})'
                        % ' or '.join(sorted(layouts)))]
    found = []
    if not is_bool(wheel_set['nvcc']):
        found.append(problem(name + '.nvcc', wheel_set['nvcc'], BOOL_ALLOWED))
    layout = wheel_set['layout']
    if isinstance(layout, str) and layout in layouts:
        layout = layouts[layout]
    elif not is_mapping(layout):
        found.append(problem(name + '.layout', layout, '%s, or a layout mapping {kind, merge, links, required}'
                             % ' or '.join(sorted(layouts))))
        layout = None
    if layout is not None:
        errors = layout_errors(dict(layout))
        if errors:
            found.append(problem(name + '.layout', wheel_set['layout'], '; '.join(errors)))
    wheels = wheel_set['wheels']
    errors = wheels_errors(list(wheels) if is_list(wheels) else wheels)
    if is_list(wheels):
        errors += ['wheels[%d] has keys beyond %s' % (index, ', '.join(WHEEL_KEYS)) for index, wheel in enumerate(wheels)
                   if is_mapping(wheel) and set(map(str, wheel)) - set(WHEEL_KEYS)]
    if errors:
        found.append(problem(name + '.wheels', wheels, '; '.join(errors)))
    return found


def check_wheel_sets(values, probes):
    # Every set of cuda_toolkit_wheel_sets, and the role's pinned set the wheels method uses, with the
    # cuda_toolkit_wheels module's rules: a layout path outside the toolkit (an absolute or ".." link
    # key) and a key that is no "major.minor" version are refused here, before anything is installed.
    own = values['cuda_toolkit_wheel_sets']
    if not is_mapping(own):
        return [problem('cuda_toolkit_wheel_sets', own, 'a mapping of "major.minor" versions to {nvcc, layout, wheels}')]
    layouts = values['__cuda_toolkit_wheel_layouts'] or {}
    found = []
    for key in sorted(own, key=str):
        name = 'cuda_toolkit_wheel_sets[%s]' % json.dumps(key, default=str)
        if not _version_ok(key):
            # A number key (13.0 unquoted) would reach the module as the string "13.0" and never be used.
            found.append(problem(name, own[key], 'a set keyed by a quoted "major.minor" version such as "13.0"'))
            continue
        found += _wheel_set_problems(name, own[key], layouts)
    version = values['cuda_toolkit_version']
    pinned = values['__cuda_toolkit_wheel_sets'] or {}
    if values['cuda_toolkit_method'] == 'wheels' and isinstance(version, str) and version in pinned and version not in own:
        found += _wheel_set_problems('__cuda_toolkit_wheel_sets[%s]' % json.dumps(version), pinned[version], layouts)
    return found


def check_package_method(values, probes):
    if values['cuda_toolkit_method'] != 'package':
        return []
    facts = values['ansible_facts'] if is_mapping(values['ansible_facts']) else {}
    distros = values['__cuda_toolkit_apt_distros'] or []
    arch_dirs = values['__cuda_toolkit_apt_arch_dirs'] or {}
    distro, arch = values['__cuda_toolkit_apt_distro'], facts.get('architecture', '')
    found = []
    if facts.get('os_family') != 'Debian' or distro not in distros or arch not in arch_dirs:
        found.append(problem('cuda_toolkit_method', 'package', "a host NVIDIA's apt repository serves (%s on %s; this "
                             'host: %s on %s); choose cuda_toolkit_method wheels, runfile or existing'
                             % (', '.join(distros), ', '.join(sorted(arch_dirs)), json.dumps(distro), json.dumps(arch))))
    # A root that is no absolute path is check_paths' (one message each).
    found += check('cuda_toolkit_root', values, lambda v: not is_absolute_path(v) or v.rstrip('/') == '/usr/local',
                   "/usr/local with cuda_toolkit_method package (NVIDIA's packages install there)")
    found += check('cuda_toolkit_apt_repo_url', values, lambda v: URL_RE.match(v) and v.endswith('/'),
                   URL_ALLOWED + ' ending in /')
    key_content = values['cuda_toolkit_apt_key_content']
    found += check('cuda_toolkit_apt_key_url', values,
                   lambda v: is_string(key_content) and (len(key_content) > 0 or URL_RE.match(v)),
                   URL_ALLOWED + ' unless cuda_toolkit_apt_key_content holds the key')
    found += check('cuda_toolkit_apt_key_fingerprint', values, lambda v: v == '' or FINGERPRINT.match(v),
                   '40 upper-case hex digits, or "" (no check)')
    found += check('cuda_toolkit_apt_package', values, DEB_PACKAGE.match,
                   'a Debian package name, optionally =version')
    return found


def check_runfile_method(values, probes):
    if values['cuda_toolkit_method'] != 'runfile':
        return []
    url, path = values['cuda_toolkit_runfile_url'], values['cuda_toolkit_runfile_path']
    found = []
    if not (is_string(url) and is_string(path) and (len(url) > 0) != (len(path) > 0)):
        found.append(problem('cuda_toolkit_runfile_url', url, 'exactly one of cuda_toolkit_runfile_url and '
                             'cuda_toolkit_runfile_path (now %s) with cuda_toolkit_method runfile' % shown(path)))
    found += check('cuda_toolkit_runfile_url', values, lambda v: v == '' or URL_RE.match(v), URL_ALLOWED)
    found += check('cuda_toolkit_runfile_checksum', values, lambda v: CHECKSUM.match(v) or (v == '' and url == ''),
                   '"sha256:<hex>" or "sha512:<hex>", required with cuda_toolkit_runfile_url')
    return found


CHECKS = (
    check_os_family,
    check_version,
    check_paths,
    check_ldconfig,
    check_archs,
    check_supported_archs,
    check_command_timeout,
    check_host_compiler,
    check_network,
    check_ca_bundle_file,
    check_wheels_method,
    check_wheel_sets,
    check_package_method,
    check_runfile_method,
)
