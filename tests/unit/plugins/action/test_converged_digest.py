# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The digest of a node's input: the variables as Ansible resolves them for the host (a real Templar over the roles'
real files), keyed; what changes it and what does not; what the fast path cannot know before the roles run."""

from __future__ import annotations

import os
import shutil
import stat
import threading

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from trust import trusted  # tests/unit/trust.py

from ansible_collections.inferops.gpu.plugins.action import converged as action
from ansible_collections.inferops.gpu.plugins.action.converged import (
    NODE_ROLES, ROOT, code_digest, fast_path_key, input_digest, input_names, lock_files, role_digests,
)

KEY = b'k' * 64
VARS = {'ml_env_profile': 'ci-a', 'sglang_server_port': 30000, 'inventory_hostname': 'h1',
        'sglang_server_api_key': '{{ vault_key }}', 'vault_key': 'sk-1', 'hostvars': {'x': 1}, '__ml_env_hash': 'x',
        'rolling_serial': 1, 'inferops_fast_path': True, 'inferops_proxy': {'https_proxy': 'http://p:3128'}}
VALUES = {'ml_env_profile': 'ci-a', 'sglang_server_port': 30000}
LOADER = DataLoader()
ROLE_FILES = action.load_role_variables(lambda path: action.load_file(LOADER, path))


def resolved(task_vars):
    """(values, unresolved) of a host with these variables, as the action plugin resolves them."""
    # As the fast path's play has them: no fact gathered, so ansible_facts is empty.
    task_vars = dict(trusted(task_vars), inventory_hostname=task_vars.get('inventory_hostname', 'h1'),
                     groups=task_vars.get('groups', {'all': ['h1'], 'ungrouped': []}), ansible_facts={})
    defaults, role_vars = ROLE_FILES
    settings = action.Settings(Templar(loader=LOADER, variables={}), task_vars, defaults, role_vars)
    return action.resolve(settings, action.input_names(task_vars, defaults, role_vars), task_vars)


def digest(task_vars, code='code', key=KEY):
    values, unresolved = resolved(task_vars)
    return input_digest(values, code, None, key), unresolved


def test_only_the_role_and_collection_variables_count_and_not_those_that_steer_a_run():
    assert input_names(VARS, {}, {}) == ['inferops_proxy', 'ml_env_profile', 'sglang_server_api_key',
                                         'sglang_server_port']
    same = dict(VARS, rolling_serial=4, inferops_fast_path=False, inventory_hostname='h2', ansible_host='10.0.0.9',
                inferops_fast_path_key_file='/elsewhere')
    assert digest(same) == digest(VARS)


def test_a_changed_input_or_code_changes_the_digest():
    base, unresolved = digest(VARS)
    assert unresolved == {}
    assert digest(dict(VARS, ml_env_profile='ci-b'))[0] != base
    assert digest(dict(VARS, sglang_server_extra_args=['--x']))[0] != base
    assert digest(VARS, code='other code')[0] != base
    # The same input under another controller's key is another digest: a guess cannot be tested without it.
    assert digest(VARS, key=b'other')[0] != base


def test_a_variable_that_refers_to_another_moves_with_the_value_it_refers_to():
    """Issue 41: a rotated secret behind a reference, and a path built from another variable, were digested as
    written and never applied."""
    base = digest(VARS)[0]
    assert digest(dict(VARS, vault_key='sk-2'))[0] != base
    # Written differently, resolved the same: the same input.
    assert digest(dict(VARS, sglang_server_api_key='sk-1'))[0] == base
    paths = dict(VARS, models_root='/shared', sglang_server_model_path='{{ models_root }}/kimi')
    assert digest(dict(paths, models_root='/srv'))[0] != digest(paths)[0]
    # A role default built from the host's variables follows them too (sglang_server_python from ml_env_path).
    assert digest(dict(VARS, ml_env_path='/opt/other'))[0] != base


def test_a_group_member_change_moves_a_default_built_on_groups():
    one = {'all': ['h1'], 'ungrouped': [], 'sglang_gateway': ['gw-1']}
    two = dict(one, sglang_gateway=['gw-2'])
    assert digest(dict(VARS, groups=one))[0] != digest(dict(VARS, groups=two))[0]


def test_a_vaulted_value_counts_by_its_plain_text():
    class Vaulted:
        def __init__(self, text):
            self.text = text

        def __str__(self):
            return self.text
    assert input_digest(dict(VALUES, v=Vaulted('sk-1')), 'code', None, KEY) != \
        input_digest(dict(VALUES, v=Vaulted('sk-2')), 'code', None, KEY)


def test_a_value_built_on_a_fact_or_a_failing_template_is_never_taken_as_unchanged():
    dummy, unresolved = digest(dict(VARS, sglang_server_extra_args="{{ ['--x', ansible_facts.nproc | default(1)] }}"))
    assert unresolved == {'sglang_server_extra_args': 'it reads the gathered fact ansible_facts'}
    # Through another variable, and as an injected fact with a default.
    dummy, unresolved = digest(dict(VARS, cores="{{ ansible_processor_vcpus | default(8) }}",
                                    sglang_server_args="{{ ['--tp', cores] }}"))
    assert unresolved == {'sglang_server_args': 'it reads the gathered fact ansible_processor_vcpus'}
    # A registered result or a fact a role publishes is not there before the roles run: the template fails.
    dummy, unresolved = digest(dict(VARS, gpu_health_expected_gpus='{{ gpu_count.stdout | int }}'))
    assert list(unresolved) == ['gpu_health_expected_gpus']
    assert unresolved['gpu_health_expected_gpus'].startswith('its template fails on the controller: ')
    # A secret's failure never shows Jinja's message (it may quote the value).
    dummy, unresolved = digest(dict(VARS, sglang_server_api_key='{{ vault_missing }}'))
    assert unresolved == {'sglang_server_api_key': 'its template fails on the controller'}
    # Connection settings and the inventory's own ansible_* values are not facts.
    dummy, unresolved = digest(dict(VARS, ansible_user='ops', sglang_server_served_model_name='{{ ansible_user }}-m',
                                    sglang_server_host="{{ ansible_host | default('127.0.0.1') }}"))
    assert unresolved == {}


def test_each_role_digest_moves_with_its_own_input_only():
    codes = dict((role, role) for role in NODE_ROLES + ('shared',))
    values = resolved(VARS)[0]
    base = role_digests(values, codes, None, KEY)
    server = role_digests(resolved(dict(VARS, vault_key='sk-2'))[0], codes, None, KEY)
    assert [role for role in NODE_ROLES if server[role] != base[role]] == ['sglang_server']
    # A shared variable or shared code moves every role; a lock file only ml_env.
    shared = role_digests(resolved(dict(VARS, rolling_steps=['ml_env']))[0], codes, None, KEY)
    assert all(value != base[role] for role, value in shared.items())
    assert all(value != base[role] for role, value in role_digests(values, dict(codes, shared='o'), None, KEY).items())
    locked = role_digests(values, codes, {'ci-lock': 'b' * 64}, KEY)
    assert [role for role in NODE_ROLES if locked[role] != base[role]] == ['ml_env']
    # What only steers a run moves none.
    assert role_digests(resolved(dict(VARS, rolling_serial=4, inferops_fast_path=False))[0], codes, None, KEY) == base


def test_the_key_is_made_once_private_and_kept(tmp_path):
    path = str(tmp_path / 'home' / 'inferops' / 'fast-path.key')
    keys = []
    threads = [threading.Thread(target=lambda: keys.append(fast_path_key(path))) for dummy in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(keys)) == 1 and len(keys[0]) == 64
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and os.listdir(os.path.dirname(path)) == ['fast-path.key']
    assert fast_path_key(path) == keys[0]
    assert action.key_file({'inferops_fast_path_key_file': path}) == path
    assert action.key_file({}).endswith(os.path.join('inferops', 'fast-path.key'))


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
    assert input_digest(VALUES, 'code', first, KEY) != input_digest(VALUES, 'code', second, KEY)
    # A lock that cannot be found counts as such (the check play then says why).
    assert lock_files({'x': {'lock': 'missing.txt'}}, lambda path: str(tmp_path / path)) == {'x': 'unreadable'}
    assert lock_files('{{ not templated }}', lambda path: path) == {}


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


def test_a_reference_inside_a_mapping_or_list_moves_the_digest_too():
    nested = dict(VARS, sglang_server_extra_environment={'HF_HOME': '{{ hf_home }}'}, hf_home='/a',
                  sglang_server_extra_args=['--x', '{{ hf_home }}'])
    assert digest(dict(nested, hf_home='/b'))[0] != digest(nested)[0]
    assert digest(nested)[0] == digest(dict(nested))[0]
