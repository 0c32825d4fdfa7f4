# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runtime_env role's filter: runtime_env_arch (the logic is module_utils/runtime_env/arch.py)."""

from __future__ import annotations

from ansible_collections.inferops.gpu.plugins.module_utils.runtime_env.arch import choose


def runtime_env_arch(gpus, setting, profiles):
    capability, variables, reason = choose(setting, gpus, profiles)
    return {'capability': capability, 'vars': variables, 'reason': reason}


class FilterModule(object):
    """The runtime_env filters."""

    def filters(self):
        return {'runtime_env_arch': runtime_env_arch}
