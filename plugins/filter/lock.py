# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stack's lock, read on the controller: the filters lock_packages and lock_problems (the parser
is module_utils/ml_env/lock.py, which ml_env's input checks share)."""

from __future__ import annotations

from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.lock import lock_packages, lock_problems


class FilterModule(object):
    """The lock's filters."""

    def filters(self):
        return {
            'lock_problems': lock_problems,
            'lock_packages': lock_packages,
        }
