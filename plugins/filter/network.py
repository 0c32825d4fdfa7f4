# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection-wide network settings' filters: network_problems and proxy_env (the logic is in
module_utils/_common/network_input.py, which the roles' input checks share)."""

from __future__ import annotations

from ansible_collections.inferops.gpu.plugins.module_utils._common.network_input import network_problems, proxy_env


class FilterModule(object):
    """The network settings' filters."""

    def filters(self):
        return {
            'network_problems': network_problems,
            'proxy_env': proxy_env,
        }
