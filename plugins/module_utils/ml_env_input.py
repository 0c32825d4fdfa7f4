# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ml_env role's input checks (input_checks.py says how they are shaped)."""

from __future__ import annotations

NAMES = ()
CHECKS = ()
