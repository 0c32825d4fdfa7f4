# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The digest of a node's input: what changes it and what does not."""

from __future__ import annotations

import shutil

from ansible_collections.inferops.gpu.plugins.action.converged import ROOT, code_digest, input_digest, input_variables, lock_files

VARS = {'ml_env_profile': 'ci-a', 'sglang_server_port': 30000, 'inventory_hostname': 'h1',
        'sglang_server_api_key': '{{ vault_key }}', 'hostvars': {'x': 1}, '__ml_env_hash': 'x',
        'rolling_serial': 1, 'inferops_fast_path': True, 'inferops_proxy': {'https_proxy': 'http://p:3128'}}


def test_only_the_role_and_collection_variables_count_and_not_those_that_steer_a_run():
    assert sorted(input_variables(VARS)) == ['inferops_proxy', 'ml_env_profile', 'sglang_server_api_key',
                                             'sglang_server_port']
    same = dict(VARS, rolling_serial=4, inferops_fast_path=False, inventory_hostname='h2', ansible_host='10.0.0.9')
    assert input_digest(same, 'code') == input_digest(VARS, 'code')


def test_a_changed_input_or_code_changes_the_digest():
    base = input_digest(VARS, 'code')
    assert input_digest(dict(VARS, ml_env_profile='ci-b'), 'code') != base
    assert input_digest(dict(VARS, sglang_server_extra_args=['--x']), 'code') != base
    assert input_digest(dict(VARS, sglang_server_api_key='{{ other }}'), 'code') != base
    assert input_digest(VARS, 'other code') != base


def test_values_json_cannot_encode_are_hashed_by_their_text():
    class Vaulted:
        def __str__(self):
            return 'secret'
    assert input_digest(dict(VARS, sglang_server_hf_token=Vaulted()), 'code') != input_digest(VARS, 'code')


def test_the_code_digest_covers_the_collection_and_sees_a_change(tmp_path):
    copy = tmp_path / 'gpu'
    for top in ('meta', 'playbooks', 'plugins', 'roles'):
        shutil.copytree(str(ROOT + '/' + top), str(copy / top), ignore=shutil.ignore_patterns('__pycache__'))
    first = code_digest(str(copy))
    assert first == code_digest(str(copy)) and first == code_digest(ROOT)
    (copy / 'tests.txt').write_text('outside the code')
    (copy / 'roles' / 'ml_env' / 'README.md').write_text('documentation changes nothing on a node')
    assert code_digest(str(copy)) == first
    defaults = copy / 'roles' / 'ml_env' / 'defaults' / 'main.yml'
    defaults.write_text(defaults.read_text() + '# a changed default\n')
    assert code_digest(str(copy)) != first


def test_a_lock_changed_in_place_changes_the_digest(tmp_path):
    lock = tmp_path / 'ci-lock.txt'
    lock.write_text('six==1.17.0 --hash=sha256:%s\n' % ('a' * 64))
    profiles = {'ci-lock': {'packages': {'six': '1.17.0'}, 'lock': str(lock)}, 'ci-b': {'packages': {}}}
    first = lock_files(profiles, lambda path: path)
    assert list(first) == ['ci-lock']
    lock.write_text('six==1.17.0 --hash=sha256:%s\n' % ('b' * 64))
    second = lock_files(profiles, lambda path: path)
    assert input_digest(VARS, 'code', first) != input_digest(VARS, 'code', second)
    # A lock that cannot be found counts as such (the check play then says why).
    assert lock_files({'x': {'lock': 'missing.txt'}}, lambda path: str(tmp_path / path)) == {'x': 'unreadable'}
    assert lock_files('{{ not templated }}', lambda path: path) == {}


def test_each_role_digest_moves_with_its_own_input_only():
    from ansible_collections.inferops.gpu.plugins.action.converged import NODE_ROLES, role_digests
    codes = dict((role, role) for role in NODE_ROLES + ('shared',))
    base = role_digests(VARS, codes)
    server = role_digests(dict(VARS, sglang_server_port=30001), codes)
    assert [role for role in NODE_ROLES if server[role] != base[role]] == ['sglang_server']
    # A shared variable or shared code moves every role; a lock file only ml_env.
    assert all(value != base[role] for role, value in role_digests(dict(VARS, rolling_steps=['ml_env']), codes).items())
    assert all(value != base[role] for role, value in role_digests(VARS, dict(codes, shared='other')).items())
    locked = role_digests(VARS, codes, {'ci-lock': 'b' * 64})
    assert [role for role in NODE_ROLES if locked[role] != base[role]] == ['ml_env']
    # What only steers a run moves none.
    assert role_digests(dict(VARS, rolling_serial=4, inferops_fast_path=False), codes) == base


def test_a_role_code_change_moves_that_role_digest_and_a_plugin_change_all(tmp_path):
    from ansible_collections.inferops.gpu.plugins.action.converged import code_digests
    copy = tmp_path / 'gpu'
    for top in ('meta', 'playbooks', 'plugins', 'roles'):
        shutil.copytree(str(ROOT + '/' + top), str(copy / top), ignore=shutil.ignore_patterns('__pycache__'))
    first = code_digests(str(copy))
    template = copy / 'roles' / 'sglang_server' / 'defaults' / 'main.yml'
    template.write_text(template.read_text() + '# a changed default\n')
    second = code_digests(str(copy))
    assert [name for name in sorted(first) if first[name] != second[name]] == ['sglang_server']
    module = copy / 'plugins' / 'modules' / 'converged.py'
    module.write_text(module.read_text() + '# changed\n')
    assert [name for name in sorted(first) if code_digests(str(copy))[name] != second[name]] == ['shared']
    assert code_digest(str(copy)) != code_digest(ROOT)
