# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""role_setting through a real Templar, as a playbook or another role's defaults call it: the host's value, else
the owning role's default (or its vars/main.yml), templated with the host's variables."""

from __future__ import annotations

import copy

import pytest
import yaml
from ansible.errors import AnsibleError
from ansible.parsing import dataloader
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from trust import trust_as_template  # tests/unit/trust.py

from ansible_collections.inferops.gpu.plugins.plugin_utils.role_settings import ROOT


def render(expression, **host_vars):
    variables = dict((name, trust_as_template(value) if isinstance(value, str) else value) for name, value in host_vars.items())
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


def role_default(role, name):
    with open('%s/roles/%s/defaults/main.yml' % (ROOT, role)) as handle:
        return yaml.safe_load(handle)[name]


def test_the_roles_default_when_the_host_sets_nothing():
    assert render("{{ lookup('inferops.gpu.role_setting', 'sglang_server_log_dir') }}") == role_default('sglang_server', 'sglang_server_log_dir')


def test_the_hosts_value_wins():
    assert render("{{ lookup('inferops.gpu.role_setting', 'sglang_server_log_dir') }}", sglang_server_log_dir='/srv/logs') == '/srv/logs'


def test_a_roles_derived_name_is_templated_with_the_hosts_variables():
    found = render("{{ query('inferops.gpu.role_setting', '__sglang_server_config_path', '__sglang_server_unit') }}",
                   sglang_server_unit_name='kimi', sglang_server_config_dir='/etc/kimi')
    assert found == ['/etc/kimi/kimi.yaml', 'kimi.service']


def test_the_rolling_roles_snapshot_follows_the_servers_settings():
    # roles/rolling/defaults/main.yml: the files the rollback puts back are where the server role writes them.
    files = render(role_default('rolling', 'rolling_snapshot_files'), sglang_server_unit_name='kimi')
    assert files == ['/etc/systemd/system/kimi.service', '/etc/sglang/kimi.yaml', '/etc/sglang/kimi.env',
                     '/etc/inferops/runtime-env.json', '/etc/inferops/runtime-env.env']


def test_gpu_health_names_the_servers_unit_or_its_pid_file_by_its_manager():
    assert render(role_default('gpu_health', 'gpu_health_own_units')) == ['sglang-server.service']
    assert render(role_default('gpu_health', 'gpu_health_own_pid_files')) == []
    assert render(role_default('gpu_health', 'gpu_health_own_units'), sglang_server_manager='process') == []
    assert render(role_default('gpu_health', 'gpu_health_own_pid_files'), sglang_server_manager='process',
                  sglang_server_log_dir='/srv/logs') == ['/srv/logs/sglang-server.pid']


def test_a_name_no_role_defines_fails_naming_it():
    with pytest.raises(AnsibleError, match='sglang_server_no_such_setting is not defined'):
        render("{{ lookup('inferops.gpu.role_setting', 'sglang_server_no_such_setting') }}")


class CountingCopy:
    """The copy module as DataLoader sees it, counting its deep copies."""

    def __init__(self):
        self.deep = 0

    def deepcopy(self, value, *args):
        self.deep += 1
        return copy.deepcopy(value, *args)


def test_the_roles_files_are_read_from_the_loaders_cache_as_they_are(monkeypatch):
    # The lookup runs in every template that reaches a role default built on it: a deep copy of the roles' files
    # on each call was a quarter of a converge's controller CPU. Nothing copies them, and nothing changes them.
    loader = DataLoader()
    templar = Templar(loader=loader, variables={})
    expression = trust_as_template("{{ lookup('inferops.gpu.role_setting', '__sglang_server_config_path') }}")
    first = templar.template(expression)
    cached = dict((path, copy.deepcopy(data)) for path, data in loader._FILE_CACHE.items())
    assert cached, 'the lookup read no role file through the loader'
    counting = CountingCopy()
    monkeypatch.setattr(dataloader, 'copy', counting)
    assert templar.template(expression) == first
    assert counting.deep == 0
    assert loader._FILE_CACHE == cached
