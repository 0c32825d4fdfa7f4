# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The distro's own sitecustomize.py (Debian 13's /etc/python3.13/sitecustomize.py, Ubuntu 24.04's 3.12 one: the same
7 lines), which the by-hand upgrade appended to; shared by the tests of the search and of the takeover (tests/unit is
on sys.path: conftest.py)."""

from __future__ import annotations

DISTRO_SITECUSTOMIZE = '''# install the apport exception handler if available
try:
    import apport_python_hook
except ImportError:
    pass
else:
    apport_python_hook.install()
'''
