# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_server input checks where tests/bad_inputs/sglang_server.yml does not pin them: the
args' parser, values as `-e` or ansible-core 2.17 pass them (strings), and what is never shown."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.sglang import server_validate as checks
from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import MISSING, run_checks

READ_OPTIONS = {'--tp': 'tp', '--tp-size': 'tp', '--tensor-parallel-size': 'tp', '--pp': 'pp', '--pp-size': 'pp',
                '--pipeline-parallel-size': 'pp', '--node-rank': 'node_rank', '--nnodes': 'nnodes', '--log-level': 'log_level'}


def values(**changed):
    """The defaults as the lookup renders them, with `changed` over them."""
    base = dict((name, 30) for name, _minimum in checks.NUMBERS)
    base.update((name, '/var/lib/sglang') for name in checks.PATHS)
    base.update(dict.fromkeys(checks.SECRETS, ''))
    base.update(
        __sglang_server_os_family='Debian', __sglang_server_os_families=['Debian'], inferops_adopt=MISSING,
        sglang_server_model_path='/srv/models/demo', sglang_server_host='127.0.0.1', sglang_server_port=30000,
        sglang_server_served_model_name='', sglang_server_user='sglang', sglang_server_group='sglang',
        sglang_server_unit_name='sglang-server', sglang_server_release='', sglang_server_toolkit_version='13.0',
        sglang_server_log_rotate_size='100M', sglang_server_protect_home='yes', __sglang_server_protect_home='yes',
        sglang_server_preflight_ignore=[], sglang_server_throughput_baseline=0, sglang_server_throughput_ratio=0.8,
        sglang_server_extra_environment={}, __sglang_server_read_options=READ_OPTIONS, sglang_server_limit_nofile=65536,
        sglang_server_args=['--tp', '8', '--cuda-graph-max-bs', '128'], sglang_server_extra_args=[],
        sglang_server_sglang_version='0.5.9', inventory_hostname='node-1')
    base.update(changed)
    assert sorted(base) == sorted(checks.NAMES)
    return base


def problems(probes=None, **changed):
    return run_checks(checks.CHECKS, values(**changed), probes or {})


def test_tp_times_pp_is_checked_against_the_gpus_gpu_info_found():
    eight = {'gpus': {'count': 8, 'backend': 'nvml'}}
    assert problems(eight) == []
    found = problems(eight, sglang_server_args=['--tp', '8', '--pp', '2'])
    assert found == ['sglang_server_args = ["--tp", "8", "--pp", "2"] is not allowed: a tensor x pipeline parallel size the '
                     'host has GPUs for: --tp 8 x --pp 2 = 16 GPUs, node-1 has 8 (gpu_info); lower --tp/--pp, or list '
                     'gpu_count in sglang_server_preflight_ignore where the GPUs are not visible yet']
    # No probe (validate.yml), a skipped one (state stopped, gpu_count ignored), or bad sizes: no verdict.
    for probes in ({}, {'gpus': {'skipped': True}}):
        assert problems(probes, sglang_server_args=['--tp', '16']) == []
    # No GPU found: refused with the preflight's fix (issue 41: the preflight named it deep in a roll).
    assert problems({'gpus': {'count': 0, 'backend': 'none'}}, sglang_server_args=['--tp', '16']) == [
        'sglang_server_preflight_ignore = [] is not allowed: a host with GPUs for --tp 16 x --pp 1 = 16 GPUs: node-1 '
        'has none (gpu_info: no GPU found (backend none)); install or repair the NVIDIA driver, or list gpu_count and '
        'gpu_clean in sglang_server_preflight_ignore on a host without GPUs']
    assert len(problems(eight, sglang_server_args=['--tp', 'x'])) == 1  # check_read_values names it


def test_a_multi_node_launch_needs_its_share_of_the_gpus_on_each_node():
    eight = {'gpus': {'count': 8, 'backend': 'nvml'}}
    # a member of a TP group of 2 (the role's --nnodes: probe nnodes): --tp 16 is 8 GPUs here
    assert problems(dict(eight, nnodes=2), sglang_server_args=['--tp', '16']) == []
    # the same with --nnodes in the arguments of a launch outside a group
    assert problems(eight, sglang_server_args=['--tp', '16', '--nnodes', '2']) == []
    found = problems(dict(eight, nnodes=2), sglang_server_args=['--tp', '32'])
    assert found == ['sglang_server_args = ["--tp", "32"] is not allowed: a tensor x pipeline parallel size the host has GPUs '
                     'for: --tp 32 x --pp 1 / 2 nodes = 16 GPUs, node-1 has 8 (gpu_info); lower --tp/--pp, or list gpu_count '
                     'in sglang_server_preflight_ignore where the GPUs are not visible yet']


def test_the_defaults_pass():
    assert problems() == []


def test_an_option_the_release_no_longer_takes_is_refused_naming_its_replacement():
    # sglang 0.5.23 has only --cuda-graph-max-bs-decode/-prefill: argparse exits 2, "ambiguous option".
    found = problems(sglang_server_sglang_version='0.5.23')
    assert found == ['sglang_server_args[2] = "--cuda-graph-max-bs" is not allowed: an option sglang 0.5.23 takes: '
                     '--cuda-graph-max-bs is gone in sglang 0.5.23 (argparse exits 2: "ambiguous option"); use '
                     '--cuda-graph-max-bs-decode (and --cuda-graph-max-bs-prefill)']
    assert problems(sglang_server_sglang_version='0.5.23', sglang_server_args=['--cuda-graph-max-bs-decode', '128']) == []
    assert problems(sglang_server_sglang_version='0.5.23.post1', sglang_server_extra_args=['--cuda-graph-max-bs=64'])
    # A release the collection does not support is refused by itself, with no advice about another's options.
    assert problems(sglang_server_sglang_version='0.5.16') == [
        'sglang_server_sglang_version = "0.5.16" is not allowed: a release the collection supports: 0.5.9, 0.5.23 '
        '(a local label or a .postN may follow, e.g. 0.5.9+cu130); it is the sglang the ml-env profile pins']
    assert len(problems(sglang_server_sglang_version='0.6', sglang_server_args=['--cuda-graph-max-bs', '128'])) == 1


def test_the_default_args_are_the_releases_own():
    from ansible_collections.inferops.gpu.plugins.module_utils.sglang.versions import default_args
    for version in ('0.5.9', '0.5.23', '0.5.23.post1', '0.5.9+cu130'):
        assert problems(sglang_server_sglang_version=version, sglang_server_args=default_args(version)) == [], version
    assert '--cuda-graph-max-bs-decode' in default_args('0.5.23') and '--cuda-graph-max-bs' in default_args('0.5.9')


@pytest.mark.parametrize('version', ['', 'latest', None, 5])
def test_a_version_that_is_none_is_refused(version):
    assert problems(sglang_server_sglang_version=version)[0].startswith('sglang_server_sglang_version = ')


def test_a_log_level_is_one_of_loggings():
    assert problems(sglang_server_args=['--log-level', 'warning']) == []
    assert problems(sglang_server_args=['--log-level=ERROR']) == []
    assert problems(sglang_server_args=['--log-level', 'loud']) == [
        'sglang_server_args[1] = "loud" is not allowed: one of debug, info, warning, warn, error, critical, fatal as the '
        'value of --log-level (the role reads it for whether the log prints the ready line, an INFO line (the levels of '
        'logging))']


def test_strings_as_from_e_pass():
    assert problems(sglang_server_port='30001', sglang_server_timeout='3000', sglang_server_throughput_baseline='96.1',
                    sglang_server_throughput_ratio='1', sglang_server_log_rotate_size=100,
                    sglang_server_args=['--tp', 8, '--pp-size=2', '--node-rank', '0']) == []


@pytest.mark.parametrize('args, bad', [
    # The last value given counts, as argparse takes it.
    (['--tp', 'eight', '--tp', '8'], None),
    (['--tp', '8', '--tp=eight'], 'sglang_server_args[2] = "--tp=eight" is not allowed: an integer of at least 1'),
    (['--nnodes', '0'], 'sglang_server_args[1] = "0" is not allowed: an integer of at least 1 as the value of --nnodes'),
    (['--node-rank', '0', '--tensor-parallel-size', '2'], None),
    # The word after a read option is its value, even one that looks like an option.
    (['--pp', '--tp'], 'sglang_server_args[1] = "--tp" is not allowed: --tp followed by a number'),
])
def test_read_values(args, bad):
    found = checks.check_read_values(values(sglang_server_args=args), {})
    assert found == [] if bad is None else any(bad in one for one in found), found


def test_read_values_span_the_extra_args():
    found = checks.check_read_values(values(sglang_server_extra_args=['--pp-size']), {})
    assert found == ['sglang_server_extra_args[0] = "--pp-size" is not allowed: --pp-size followed by a number, not as '
                     'the last argument']
    assert checks.check_read_values(values(sglang_server_args=['--pp-size'], sglang_server_extra_args=['2']), {}) == []


@pytest.mark.parametrize('arg, owned', [
    ('--enable-metrics-for-all-schedulers', False),  # longer than an owned option: another one
    ('--', False),
    ('--po', True),  # an argparse prefix of --port
    ('--api-key=sk-secret', True),
    ('-m', False),
])
def test_owned_options(arg, owned):
    found = checks.check_args(values(sglang_server_extra_args=[arg]), {})
    assert bool(found) is owned, found
    assert not any('sk-secret' in one for one in found)


def test_args_that_are_not_lists():
    found = checks.check_args(values(sglang_server_args='--tp 8'), {})
    assert found == ['sglang_server_args = "--tp 8" is not allowed: a list of arguments, one argv word each']
    assert checks.check_read_values(values(sglang_server_args='--tp 8'), {}) == []


def test_protect_home_as_the_unit_gets_it():
    # A boolean reaches the unit as yes/no (vars/main.yml's __sglang_server_protect_home).
    assert problems(sglang_server_protect_home=False, __sglang_server_protect_home='no',
                    sglang_server_model_path='/root/models/x') == []
    found = problems(sglang_server_protect_home=True, __sglang_server_protect_home='yes',
                     sglang_server_model_path='/run/user/1000/m')
    assert found and found[0].startswith('sglang_server_protect_home = true is not allowed: read-only or no')
    assert problems(sglang_server_protect_home='tmpfs', __sglang_server_protect_home='tmpfs',
                    sglang_server_model_path='/homes/m') == []


def test_extra_environment():
    found = checks.check_extra_environment(values(sglang_server_extra_environment={
        'HUGGING_FACE_HUB_TOKEN': 'hf_x', '1BAD': 'v', 'MY_TOKEN': True, 'OK': 1, 'ALSO_OK': 'a=b'}), {})
    assert found == [
        'sglang_server_extra_environment.HUGGING_FACE_HUB_TOKEN = (hidden) is not allowed: set sglang_server_hf_token '
        'instead, which the role keeps in a 0600 file',
        'sglang_server_extra_environment = {"1BAD": "v"} is not allowed: variable names matching [A-Za-z_][A-Za-z0-9_]*',
        'sglang_server_extra_environment.MY_TOKEN = (hidden) is not allowed: a string or a number (quote booleans, e.g. "1")',
    ]
    assert checks.check_extra_environment(values(sglang_server_extra_environment='A=1'), {}) == [
        'sglang_server_extra_environment = "A=1" is not allowed: a mapping of variable names to strings or numbers']


def test_secrets_are_never_shown():
    found = problems(sglang_server_api_key='sk key', sglang_server_hf_token=12345)
    assert found == ['sglang_server_api_key = (hidden) is not allowed: printable ASCII without spaces (it goes into a '
                     'YAML file and an HTTP header)',
                     'sglang_server_hf_token = (hidden) is not allowed: printable ASCII without spaces (it goes into a '
                     'YAML file and an HTTP header)']


def test_counts_are_shown_though_their_names_hold_token():
    assert problems(sglang_server_throughput_max_new_tokens=0) == [
        'sglang_server_throughput_max_new_tokens = 0 is not allowed: an integer of at least 1']


@pytest.mark.parametrize('changed', [
    {'sglang_server_port': True},
    {'sglang_server_throughput_ratio': 'inf'},
    {'sglang_server_throughput_baseline': '1e3'},
    {'sglang_server_toolkit_version': 13.0},
    {'sglang_server_host': 10},
    {'sglang_server_release': '/opt/ml-env/releases/../x'},
    {'sglang_server_model_path': MISSING},
    {'sglang_server_group': 'root'},
])
def test_refused(changed):
    found = problems(**changed)
    name = list(changed)[0]
    assert len(found) == 1 and found[0].startswith(name + ' = '), found


@pytest.mark.parametrize('stall, overall', [(30, 30), ('29', 30), (1, '3000'), ('3000', '3000')])
def test_a_stall_limit_within_the_whole_start_passes(stall, overall):
    assert problems(sglang_server_stall_timeout=stall, sglang_server_timeout=overall) == []


def test_a_stall_limit_beyond_the_whole_start_is_refused():
    assert problems(sglang_server_stall_timeout='31', sglang_server_timeout='30') == [
        'sglang_server_stall_timeout = "31" is not allowed: at most sglang_server_timeout ("30"), the limit of the whole '
        'start: a longer stall limit would never fire']


@pytest.mark.parametrize('changed', [
    {'sglang_server_stall_timeout': 'ten', 'sglang_server_timeout': 5},
    {'sglang_server_stall_timeout': 60, 'sglang_server_timeout': 0},
    {'sglang_server_stall_timeout': 60, 'sglang_server_timeout': MISSING},
])
def test_a_bad_number_is_named_once_not_compared(changed):
    found = problems(**changed)
    assert len(found) == 1 and 'an integer of at least 1' in found[0], found


@pytest.mark.parametrize('path', ['/srv/models/../etc', '/srv/./models', '/srv/models/..', '/srv/models/.'])
def test_the_model_path_message_says_no_dot_segments(path):
    found = problems(sglang_server_model_path=path)
    assert len(found) == 1 and 'no . or .. segments' in found[0], found
