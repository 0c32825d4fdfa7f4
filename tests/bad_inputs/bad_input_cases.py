# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bad-input tables of this directory, one per role, as cases: read by the unit harness
(tests/unit/plugins/lookup/input_cases.py: every case through the Python layer) and by the
bad_input scenario (one case per role through site.yml, and the cases marked on_host on a host).

A case: `name`, `vars` (the input), then either `clean: true` (the input must pass) or `expect`
(fragments the failure must hold); optionally `probes` (what the role's host probes returned on
the bare Debian 12 host, for the checks that judge them) with `on_host: true`.
"""

from __future__ import annotations

import glob
import os

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
TABLES = sorted(glob.glob(os.path.join(HERE, '*.yml')))
# Inputs without a default that every host of site.yml must set: a case of any table gets them
# unless it sets them itself (sglang_server.yml tests them).
REQUIRED = {'sglang_server_model_path': '/srv/models/demo'}


def load_cases():
    """Every case of every table, with `role`, an `id` (role/name) and its vars over REQUIRED."""
    cases = []
    for table in TABLES:
        role = os.path.splitext(os.path.basename(table))[0]
        with open(table) as handle:
            for case in yaml.safe_load(handle):
                cases.append(dict(case, role=role, vars=dict(REQUIRED, **case['vars']), id='%s/%s' % (role, case['name'])))
    return cases
