# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection-wide proxy and CA settings: one check and one environment for every role."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.gpu.plugins.filter.network import FilterModule
from ansible_collections.inferops.gpu.plugins.module_utils._common.network_input import (
    masked,
    network_problems,
    proxy_env,
)


@pytest.mark.parametrize("proxy, ca", [
    ({}, ""),
    (None, None),
    ({"http_proxy": "http://proxy:3128", "https_proxy": "http://user:pw@proxy:3128", "no_proxy": "localhost,.x"}, ""),
    ({"https_proxy": "socks5h://proxy:1080", "http_proxy": ""}, "/etc/ssl/certs/ca-certificates.crt"),
    ({"no_proxy": None}, "/etc/ssl/certs/ca.pem"),
])
def test_good_settings_have_no_problem(proxy, ca):
    assert network_problems(proxy, ca_bundle=ca) == []


@pytest.mark.parametrize("proxy", [
    "http://proxy:3128",                                  # a string, not a mapping
    {"ftp_proxy": "http://proxy:3128"},                   # an unknown key
    {"https_proxy": "proxy:3128"},                        # no scheme
    {"https_proxy": "http://proxy:3128\nX=1"},            # several lines
    {"https_proxy": 3128},                                # a number
    {"no_proxy": "localhost\tx"},                         # a control character
])
def test_a_bad_proxy_is_one_problem_naming_the_variable_and_what_is_allowed(proxy):
    problems = network_problems(proxy)
    assert len(problems) == 1
    assert problems[0].startswith("inferops_proxy = ") and "a mapping with keys among http_proxy" in problems[0]


def test_credentials_never_appear_in_a_message():
    problems = network_problems({"https_proxy": "http://user:secret@proxy:3128 x"})
    assert "secret" not in problems[0] and "http://***@proxy:3128 x" in problems[0]
    assert "secret" not in network_problems("user:secret@proxy")[0]


@pytest.mark.parametrize("ca", ["certs/ca.pem", "/etc/../ca.pem", "/etc/./ca.pem", "/etc/ca\n.pem", 5])
def test_a_bad_ca_bundle_is_refused(ca):
    problems = network_problems({}, ca_bundle=ca)
    assert len(problems) == 1 and problems[0].startswith("inferops_ca_bundle = ")


def test_retired_variables_are_named_with_their_replacements_and_no_value():
    problems = network_problems({}, retired=["ml_env_proxy", "ml_env_ca_bundle", "ml_env_no_proxy"])
    assert problems == ['ml_env_ca_bundle, ml_env_no_proxy, ml_env_proxy (value hidden): no longer read, set '
                        'inferops_ca_bundle and inferops_proxy instead, one setting for every role '
                        '(README, "Proxy and CA")']


def test_every_problem_is_reported_at_once():
    assert len(network_problems("x", ca_bundle="rel", retired=["cuda_toolkit_proxy"])) == 3


def test_masked_keeps_the_scheme_and_the_host():
    assert masked("http://a:b@c@proxy:1") == "http://***@proxy:1"
    assert masked("http://proxy:1") == "http://proxy:1"


def test_proxy_env_has_both_spellings_and_leaves_out_empty_values():
    assert proxy_env({"https_proxy": "http://p:1", "http_proxy": "", "no_proxy": "localhost"}) == {
        "https_proxy": "http://p:1", "HTTPS_PROXY": "http://p:1", "no_proxy": "localhost", "NO_PROXY": "localhost"}
    assert proxy_env({}) == {} and proxy_env(None) == {}


def test_the_filters_are_registered():
    assert set(FilterModule().filters()) == {"network_problems", "proxy_env"}
