# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_server role's waits against what real SGLang does (sglang_versions holds its figures)."""

from __future__ import annotations

import os

import yaml

from ansible_collections.inferops.gpu.plugins.module_utils.sglang import liveness as sglang_liveness
from ansible_collections.inferops.gpu.plugins.module_utils.sglang.versions import CACHE_LAYOUT, HEALTH_CHECK_SECONDS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def role_file(*parts):
    with open(os.path.join(ROOT, 'roles', 'sglang_server', *parts)) as handle:
        return handle.read()


def test_a_liveness_probe_outwaits_sglangs_own_health_check():
    # /health_generate may take HEALTH_CHECK_SECONDS (20) under load before it answers; a shorter probe
    # timeout restarts a busy, healthy server after `failures` slow probes.
    defaults = yaml.safe_load(role_file('defaults', 'main.yml'))
    spec = yaml.safe_load(role_file('meta', 'argument_specs.yml'))['argument_specs']['main']['options']
    assert defaults['sglang_server_liveness_timeout'] > HEALTH_CHECK_SECONDS
    assert spec['sglang_server_liveness_timeout']['default'] == defaults['sglang_server_liveness_timeout']
    # The script's own default, for a timer written by hand.
    assert sglang_liveness.parse_args(['--url', 'http://127.0.0.1:30000/health_generate', '--unit', 'u.service',
                                       '--failures', '3']).timeout > HEALTH_CHECK_SECONDS


def test_a_stop_lets_sglang_drain_with_its_ranks_alive():
    # KillMode=mixed: SIGTERM to the main process only, which drains while the ranks serve.
    unit = role_file('templates', 'unit.j2')
    assert '\nKillMode=mixed\n' in unit and 'KillMode=control-group' not in unit
    defaults = yaml.safe_load(role_file('defaults', 'main.yml'))
    assert defaults['sglang_server_stop_timeout'] >= 120


def test_the_jit_caches_are_one_root_laid_out_as_sglang_lays_it_out():
    # SGLANG_CACHE_DIR is the root; every cache 0.5.23 would put under it by itself sits where it would
    # (its setdefault keeps ours), and 0.5.9, which reads SGLANG_CACHE_DIR for torch.compile only, gets
    # every one of them explicitly.
    env = yaml.safe_load(role_file('vars', 'main.yml'))['__sglang_server_jit_env']
    root = env['SGLANG_CACHE_DIR']
    assert root == '{{ __sglang_server_jit_dir }}'
    for name, sub in CACHE_LAYOUT.items():
        assert env[name] == (root + '/' + sub if sub else root), name
