#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cuda_toolkit_wheels
short_description: Install a CUDA toolkit from NVIDIA's PyPI wheels as a normal toolkit tree
version_added: 0.1.0
description:
  - Installs an exact, hash-pinned set of NVIDIA wheels (C(nvidia-cuda-nvcc), C(nvidia-cuda-runtime), ...)
    with C(pip install --target) into O(home)/O(site_dir), then lays them out as a toolkit tree
    (C(bin), C(include), C(lib64), C(nvvm)) of relative symlinks in O(home).
  - A stamp file in O(home) records the installed pin set. When it matches O(wheels) and every path in
    the C(required) list of O(layout) exists, pip does not run; only missing or wrong links are repaired.
  - A new pin set is installed into a staging directory first; the previous install is replaced only
    after pip succeeded, so a failed download leaves the tree as it was.
  - Paths in the tree that are not symlinks are never replaced; they are reported as a failure.
options:
  home:
    description: Toolkit directory, an absolute path, for example C(/usr/local/cuda-13.0). Created when missing.
    type: path
    required: true
  version:
    description: CUDA version of the pin set as C(major.minor), for example C("13.0"); recorded in the stamp.
    type: str
    required: true
  wheels:
    description:
      - The wheels to install, each pinned to one version and its allowed sha256 digests.
      - They are written to a pip requirements file, so names, versions and digests are checked first
        (distribution names, exact versions, 64 hex digits).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Distribution name on the index.
        type: str
        required: true
      version:
        description: Exact version.
        type: str
        required: true
      sha256:
        description: sha256 digests of the wheel files pip may accept (one per platform).
        type: list
        elements: str
        required: true
  layout:
    description:
      - How the installed files map to the toolkit tree.
      - C(kind) names the layout, V(cu12) (per-package directories C(nvidia/cuda_nvcc/...)) or
        V(cu13) (one shared C(nvidia/cu13/...) tree).
      - C(merge) lists C({dest, from, match}) entries, C(links) maps extra links to literal targets,
        C(required) lists paths that must exist afterwards.
      - Every path (C(merge) C(dest) and C(from), C(links) keys and targets, C(required)) is relative, made of
        segments of C(A-Z a-z 0-9 _ . + -), none of them C(.) or C(..), so nothing is ever linked outside O(home).
        C(match) is a file name pattern without C(/). Anything else fails before anything is read or changed.
    type: dict
    required: true
  site_dir:
    description: Name of the directory inside O(home) that holds the installed wheels (a plain name, no C(/)).
    type: str
    default: wheels
  validate_only:
    description: Only check the arguments, then return without reading or changing anything on the target.
    type: bool
    default: false
  python:
    description:
      - Interpreter with pip, for example a private virtual environment's C(bin/python).
      - An absolute path, or a command name looked up in E(PATH).
    type: path
    required: true
  index_url:
    description: Package index. An empty string installs only from O(find_links) (C(--no-index)).
    type: str
    default: https://pypi.org/simple
  find_links:
    description: Local wheelhouse directories (absolute) or URLs searched as well (C(--find-links)).
    type: list
    elements: str
    default: []
  ca_bundle:
    description: CA bundle pip verifies TLS with (C(--cert)), an absolute path. Empty uses pip's own bundle.
    type: str
    default: ''
  proxy:
    description:
      - Proxy settings passed to pip as environment variables; keys C(http_proxy), C(https_proxy), C(no_proxy).
      - Never logged, since proxy URLs may hold credentials.
    type: dict
    default: {}
  timeout:
    description: Seconds pip waits on the network per request.
    type: int
    default: 120
  command_timeout:
    description:
      - Seconds the whole pip run may take (several GB of wheels on a slow link) before it is killed and the
        module fails naming it. A killed run leaves the installed toolkit as it was.
    type: int
    default: 1800
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
requirements:
  - pip on the target, in the interpreter given as O(python).
author:
  - inferops.gpu maintainers (@inferops)
"""

EXAMPLES = r"""
- name: Install CUDA 13.0 from PyPI wheels into /usr/local/cuda-13.0
  inferops.gpu.cuda_toolkit_wheels:
    home: /usr/local/cuda-13.0
    version: "13.0"
    python: /opt/inferops/cuda-toolkit-pip/bin/python
    ca_bundle: /etc/ssl/certs/ca-certificates.crt
    wheels:
      - name: nvidia-cuda-nvcc
        version: 13.0.88
        sha256: [56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03]
    layout:
      kind: cu13
      merge:
        - {dest: bin, from: [nvidia/cu13/bin]}
      required: [bin/nvcc]

- name: The same from a local wheelhouse only (air-gapped)
  inferops.gpu.cuda_toolkit_wheels:
    home: /usr/local/cuda-13.0
    version: "13.0"
    python: /opt/inferops/cuda-toolkit-pip/bin/python
    index_url: ""
    find_links: [/srv/wheelhouse]
    wheels: "{{ pins }}"
    layout: "{{ layout }}"
"""

RETURN = r"""
home:
  description: The toolkit directory.
  returned: always
  type: str
  sample: /usr/local/cuda-13.0
installed:
  description: Whether pip ran in this call (or would have, in check mode).
  returned: always
  type: bool
  sample: false
pins:
  description: The pin set as C(name==version), sorted.
  returned: always
  type: list
  elements: str
  sample: [nvidia-cuda-nvcc==13.0.88]
links_created:
  description: Links created or re-pointed (relative to O(home)).
  returned: always
  type: list
  elements: str
  sample: [bin/nvcc]
links_removed:
  description: Stale links removed (relative to O(home)).
  returned: always
  type: list
  elements: str
  sample: []
"""

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.gpu.plugins.module_utils._common.atomic_file import replace_text
from ansible_collections.inferops.gpu.plugins.module_utils._common.bounded_run import CommandTimeout, module_runner

from ansible_collections.inferops.gpu.plugins.module_utils.cuda_toolkit.toolkit import (
    COMMAND_NAME_RE,
    URL_RE,
    absolute_error,
    apply_links,
    command_error,
    find_links_errors,
    layout_errors,
    link_changes,
    managed_dirs,
    missing_paths,
    plan_links,
    requirement_lines,
    show,
    site_is_complete,
    stamp_text,
    version_error,
    wheels_errors,
)

STAMP = '.inferops-wheels.json'


def read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ''


def argument_errors(params):
    """Everything wrong with the arguments, each naming the option, the value and what is allowed."""
    errors = [absolute_error('home', params['home']), version_error('version', params['version']),
              command_error('python', params['python']) if params['python'] else 'python must not be empty',
              absolute_error('ca_bundle', params['ca_bundle'], empty_ok=True)]
    if not COMMAND_NAME_RE.match(params['site_dir']) or params['site_dir'] in ('.', '..'):
        errors.append('site_dir must be a plain directory name (got %s)' % show(params['site_dir']))
    if params['index_url'] and not URL_RE.match(params['index_url']):
        errors.append('index_url must be "" or a URL (http, https, file) (got %s)' % show(params['index_url']))
    unknown = sorted(set(params['proxy']) - set(('http_proxy', 'https_proxy', 'no_proxy')))
    if unknown:
        errors.append('proxy keys must be among http_proxy, https_proxy, no_proxy (got %s)' % show(unknown))
    errors += find_links_errors('find_links', params['find_links'])
    errors += wheels_errors(params['wheels'])
    errors += layout_errors(params['layout'])
    return [error for error in errors if error]


def pip_command(params, target, requirements):
    argv = [params['python'], '-m', 'pip', 'install', '--isolated', '--no-input', '--disable-pip-version-check',
            '--no-deps', '--require-hashes', '--only-binary=:all:', '--no-compile', '--no-cache-dir',
            '--progress-bar', 'off', '--timeout', str(params['timeout']), '--target', target, '-r', requirements]
    if params['index_url']:
        argv += ['--index-url', params['index_url']]
    else:
        argv.append('--no-index')
    for link in params['find_links']:
        argv += ['--find-links', link]
    if params['ca_bundle']:
        argv += ['--cert', params['ca_bundle']]
    return argv


def proxy_environment(proxy):
    env = {}
    for key in ('http_proxy', 'https_proxy', 'no_proxy'):
        value = (proxy or {}).get(key)
        if value:
            env[key] = value
            env[key.upper()] = value
    return env


def install(module, home, site):
    """pip into a staging directory, then swap it in for the old site directory."""
    params = module.params
    staging = os.path.join(home, '.%s.staging' % params['site_dir'])
    old = os.path.join(home, '.%s.old' % params['site_dir'])
    for path in (staging, old):
        shutil.rmtree(path, ignore_errors=True)
    fd, requirements = tempfile.mkstemp(prefix='cuda-toolkit-', suffix='.txt', dir=module.tmpdir)
    with os.fdopen(fd, 'w') as handle:
        handle.write(requirement_lines(params['wheels']))
    run_command = module_runner(module, params['command_timeout'], environ_update=proxy_environment(params['proxy']))
    try:
        rc, out, err = run_command(pip_command(params, staging, requirements))
    except CommandTimeout as exc:
        shutil.rmtree(staging, ignore_errors=True)
        module.fail_json(msg='pip could not install the CUDA %s wheels: %s' % (params['version'], exc))
    if rc != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = '\n'.join((err or out).strip().splitlines()[-25:])
        module.fail_json(msg='pip could not install the CUDA %s wheels (exit %d): %s' % (params['version'], rc, tail),
                         rc=rc, stdout=out, stderr=err)
    if os.path.isdir(site):
        os.rename(site, old)
    os.rename(staging, site)
    shutil.rmtree(old, ignore_errors=True)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            home=dict(type='path', required=True),
            version=dict(type='str', required=True),
            wheels=dict(type='list', elements='dict', required=True, options=dict(
                name=dict(type='str', required=True),
                version=dict(type='str', required=True),
                sha256=dict(type='list', elements='str', required=True),
            )),
            layout=dict(type='dict', required=True),
            site_dir=dict(type='str', default='wheels'),
            validate_only=dict(type='bool', default=False),
            python=dict(type='path', required=True),
            index_url=dict(type='str', default='https://pypi.org/simple'),
            find_links=dict(type='list', elements='str', default=[]),
            ca_bundle=dict(type='str', default=''),
            proxy=dict(type='dict', default={}, no_log=True),
            timeout=dict(type='int', default=120),
            command_timeout=dict(type='int', default=1800),
        ),
        supports_check_mode=True,
    )
    params = module.params
    errors = argument_errors(params)
    if errors:
        module.fail_json(msg='cuda_toolkit_wheels: ' + '; '.join(errors), errors=errors)
    pins = sorted('%s==%s' % (w['name'], w['version']) for w in params['wheels'])
    if params['validate_only']:
        module.exit_json(changed=False, home=params['home'], installed=False, pins=pins, links_created=[],
                         links_removed=[])
    home = params['home']
    site = os.path.join(home, params['site_dir'])
    layout = params['layout']
    required = layout.get('required', [])
    stamp_path = os.path.join(home, STAMP)
    wanted_stamp = stamp_text(params['version'], layout.get('kind', ''), params['wheels'])
    current_stamp = read_text(stamp_path)

    need_install = (current_stamp != wanted_stamp or not os.path.isdir(site)
                    or not site_is_complete(home, plan_links(home, site, layout), required))

    result = dict(changed=False, home=home, installed=need_install, pins=pins, links_created=[], links_removed=[])
    diff = dict(before_header=stamp_path, after_header=stamp_path, before=current_stamp, after=wanted_stamp)

    if need_install:
        result['changed'] = True
        if module.check_mode:
            result['diff'] = diff
            module.exit_json(**result)
        if not os.path.isdir(home):
            os.makedirs(home, 0o755)
        install(module, home, site)

    plan = plan_links(home, site, layout)
    create, remove, conflicts = link_changes(home, site, plan, managed_dirs(layout))
    if conflicts:
        module.fail_json(msg='paths in %s are in the way of the toolkit links and are not symlinks (never replaced): %s'
                         % (home, ', '.join(conflicts)), conflicts=conflicts, **result)
    result['links_created'] = sorted(create)
    result['links_removed'] = remove
    if create or remove:
        result['changed'] = True
        diff['before'] = current_stamp + ''.join('link %s\n' % rel for rel in remove)
        diff['after'] = wanted_stamp + ''.join('link %s -> %s\n' % (rel, create[rel]) for rel in sorted(create))
        if not module.check_mode:
            apply_links(home, create, remove)

    if not module.check_mode:
        missing = missing_paths(home, required)
        if missing:
            module.fail_json(msg='the CUDA %s wheels did not provide %s in %s (layout %s)'
                             % (params['version'], ', '.join(missing), home, layout.get('kind', '')), **result)
        if current_stamp != wanted_stamp:
            replace_text(stamp_path, wanted_stamp, 0o644)
    if result['changed']:
        result['diff'] = diff
    module.exit_json(**result)


if __name__ == '__main__':
    main()
