# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_gateway checks where tests/bad_inputs/sglang_gateway.yml does not pin them: the
values ansible-core 2.17 renders as strings, the two binds sharing a port, keys never shown, and
one message per bad worker URL."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.inferops.gpu.plugins.module_utils.sglang import gateway_validate as gw
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import MISSING, run_checks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
KEY = '0123456789abcdef'


def role_file(*parts):
    with open(os.path.join(ROOT, 'roles', 'sglang_gateway', *parts)) as handle:
        return yaml.safe_load(handle)


# The role's defaults as the lookup renders them (no worker group in the inventory), with a key.
DEFAULTS = dict(role_file('defaults', 'main.yml'), sglang_gateway_workers=[], sglang_gateway_api_key=KEY,
                __sglang_gateway_owned_args=role_file('vars', 'main.yml')['__sglang_gateway_owned_args'])


def problems(**changed):
    values = dict((name, DEFAULTS.get(name, MISSING)) for name in gw.NAMES)
    assert set(changed) <= set(gw.NAMES)
    values.update(changed)
    return run_checks(gw.CHECKS, values)


def test_defaults_pass_and_every_name_is_a_variable_of_the_role():
    assert set(gw.NAMES) - set(DEFAULTS) == set()
    assert problems() == []


def test_strings_as_from_e_pass():
    assert problems(sglang_gateway_port='8080', sglang_gateway_metrics_port='29001', sglang_gateway_cb_window='600',
                    sglang_gateway_retry_max_retries='1', sglang_gateway_extra_args=['--log-level', 'debug', 3]) == []


@pytest.mark.parametrize('changed', [
    {'sglang_gateway_metrics_port': 30080},
    {'sglang_gateway_metrics_port': '30080'},
    {'sglang_gateway_host': '0.0.0.0', 'sglang_gateway_metrics_host': '10.0.0.5', 'sglang_gateway_metrics_port': 30080},
    {'sglang_gateway_host': '10.0.0.5', 'sglang_gateway_metrics_host': '::', 'sglang_gateway_metrics_port': 30080},
])
def test_the_metrics_bind_may_not_take_the_gateways_port(changed):
    found = problems(**changed)
    assert len(found) == 1 and found[0].startswith('sglang_gateway_metrics_port = ') and \
        'a port other than sglang_gateway_port (30080) on the same address' in found[0], found


def test_the_same_port_on_two_addresses_passes():
    assert problems(sglang_gateway_host='10.0.0.5', sglang_gateway_metrics_port=30080) == []


def test_a_bad_port_is_named_once_not_compared():
    assert problems(sglang_gateway_port='http', sglang_gateway_metrics_port=29000) == [
        'sglang_gateway_port = "http" is not allowed: a port number from 1 to 65535']


@pytest.mark.parametrize('changed', [
    {'sglang_gateway_api_key': 'key with spaces here'},
    {'sglang_gateway_api_key': KEY + '\n'},
    {'sglang_gateway_api_key': 1234567890123456},
    {'sglang_gateway_api_key': 'short'},
    {'sglang_gateway_worker_api_key': 'sk node'},
    {'sglang_gateway_worker_api_key': None},
])
def test_keys_are_checked_and_never_shown(changed):
    found = problems(**changed)
    name, value = list(changed.items())[0]
    assert len(found) == 1 and found[0].startswith(name + ' = (hidden) is not allowed: '), found
    assert str(value) not in found[0] and KEY not in found[0]


def test_a_stopped_gateway_needs_no_key_but_a_given_one_is_checked():
    assert problems(sglang_gateway_state='stopped', sglang_gateway_api_key='') == []
    assert problems(sglang_gateway_state='stopped', sglang_gateway_api_key='short') == []
    assert len(problems(sglang_gateway_state='stopped', sglang_gateway_api_key='a b')) == 1


def test_each_bad_worker_url_is_named_by_its_index():
    found = problems(sglang_gateway_workers=['http://10.0.0.11:30000', 'http://x y:1/v1;rm', 'http://10.0.0.12:30000 ',
                                             5])
    assert [message.split(' = ')[0] for message in found] == [
        'sglang_gateway_workers[1]', 'sglang_gateway_workers[2]', 'sglang_gateway_workers[3]']
    assert found[0] == ('sglang_gateway_workers[1] = "http://x y:1/v1;rm" is not allowed: http://host:port or '
                        'https://host:port: a host name or IPv4 address (letters, digits and . _ -) or an IPv6 '
                        'address in brackets, a port from 1 to 65535 and no path (a trailing / at most), such as '
                        'http://10.0.0.11:30000')


def test_workers_given_as_text_are_one_problem():
    # The argument spec's list type splits "a,b" for its own check only: smg's argv would get the string.
    assert problems(sglang_gateway_workers='http://10.0.0.11:30000,http://10.0.0.12:30000') == [
        'sglang_gateway_workers = "http://10.0.0.11:30000,http://10.0.0.12:30000" is not allowed: a list of '
        'http(s)://host:port URLs such as http://10.0.0.11:30000']


@pytest.mark.parametrize('changed', [
    {'sglang_gateway_health_check_endpoint': '/health?x=1'},
    {'sglang_gateway_health_check_endpoint': ''},
    {'sglang_gateway_index_url': ''},
    {'sglang_gateway_index_url': 'pypi.org/simple'},
    {'sglang_gateway_python_interpreter': '/usr/bin/python3 -I'},
    {'sglang_gateway_group': 'root'},
    {'sglang_gateway_metrics_host': '[::1]'},
    {'sglang_gateway_command_timeout': True},
    {'sglang_gateway_retry_max_retries': 0},
])
def test_refused(changed):
    found = problems(**changed)
    assert len(found) == 1 and found[0].startswith(list(changed)[0] + ' = '), found


@pytest.mark.parametrize('changed', [
    {'sglang_gateway_index_url': 'file:///srv/wheelhouse/simple'},
    {'sglang_gateway_root': '/srv/smg@1/releases.d', 'sglang_gateway_path': '/srv/smg@1/current'},
    {'sglang_gateway_host': '::', 'sglang_gateway_metrics_host': '::1'},
    {'sglang_gateway_workers': ['https://node-1.example:443', 'http://[fd00::1]:30000/', 'http://node_2:1']},
])
def test_accepted(changed):
    assert problems(**changed) == []
