# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The environment the role asks SGLang's parser in (inferops.gpu.sglang_args, issue 41): the server's extra
environment without the variables named as secrets, which would otherwise be module arguments in the clear. The
words are input_checks.SECRET's, rendered with a real Templar over the role's real files."""

from __future__ import annotations

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from trust import trusted  # tests/unit/trust.py

from ansible_collections.inferops.gpu.plugins.module_utils._common.input_checks import is_secret
from ansible_collections.inferops.gpu.plugins.plugin_utils import role_settings

ENVIRONMENT = {'SGLANG_STANDIN_VERSION': '0.5.23', 'NCCL_DEBUG': 'INFO', 'MY_API_KEY': 'k', 'HUB_TOKEN': 't',
               'DB_PASSWORD': 'p', 'S3_SECRET': 's', 'TOKENIZERS_PARALLELISM': 'false', 'MAX_TOKENS_HINT': '8'}


def test_the_parser_gets_the_extra_environment_without_its_secrets():
    loader = DataLoader()
    defaults, role_vars = role_settings.load_role_variables(lambda path: role_settings.load_file(loader, path))
    task_vars = dict(trusted({'sglang_server_model_path': '/m', 'sglang_server_extra_environment': ENVIRONMENT}),
                     inventory_hostname='h1', groups={'all': ['h1']}, ansible_facts={})
    settings = role_settings.Settings(Templar(loader=loader, variables={}), task_vars, defaults, role_vars)
    found = settings.get('__sglang_server_parser_env')
    assert found == dict((key, value) for key, value in ENVIRONMENT.items() if not is_secret(key))
    assert sorted(found) == ['MAX_TOKENS_HINT', 'NCCL_DEBUG', 'SGLANG_STANDIN_VERSION', 'TOKENIZERS_PARALLELISM']
