# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Variables as Ansible hands them to a template (tests/unit/conftest.py puts this folder on sys.path):
ansible-core 2.19 and later template only trusted strings, which the inventory's and the role files' are;
2.17 and 2.18 template every string."""

from __future__ import annotations

try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core < 2.19
    def trust_as_template(value):
        return value


def trusted(value):
    """value with every string in it trusted, as the inventory's and the role files' are."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return dict((key, trusted(item)) for key, item in value.items())
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return value
