# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang release filter: sglang_default_args (the data is module_utils/sglang/versions.py, which
the contract step checks against the real wheels)."""

from __future__ import annotations

from ansible_collections.inferops.gpu.plugins.module_utils.sglang.versions import default_args


def sglang_default_args(version):
    return default_args(version)


class FilterModule(object):
    """The SGLang release filters."""

    def filters(self):
        return {'sglang_default_args': sglang_default_args}
