# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one style of every role's input checks (the lookup inferops.gpu.input_problems runs them).

A role's checks live in ``<role>_input.py``: ``NAMES`` (the variables they read, rendered by the
lookup), and ``CHECKS``, a tuple of functions ``check(values, probes) -> [message, ...]``. Each
message has one form, made here: the variable, its bad value (secrets hidden, credentials in
URLs masked) and what is allowed. The argument specs stay the first gate (types, choices); these
checks see what the specs let through.
"""

from __future__ import annotations

import json
import re

try:
    from collections.abc import Mapping
except ImportError:  # pragma: no cover - Python 2 is not supported
    Mapping = dict


class _Missing(object):
    """A variable that is not set (or whose template failed: the lookup says why)."""

    def __repr__(self):
        return 'MISSING'

    def __bool__(self):
        return False

    __nonzero__ = __bool__


MISSING = _Missing()

# One definition for every role (they had drifted: some missed DEL, some allowed a tab).
CONTROL = re.compile(r'[\x00-\x1f\x7f]')
DOT_SEGMENT = re.compile(r'(^|/)\.\.?(/|\Z)')
ABSOLUTE = re.compile(r'^/[^\x00-\x1f\x7f]*\Z')
DIGITS = re.compile(r'^[0-9]+\Z')
# What Ansible's `| bool` and the argument specs' bool type accept as a string.
BOOL_WORDS = ('true', 'false', 'yes', 'no', 'on', 'off', 'y', 'n', 't', 'f', '1', '0')
BOOL_ALLOWED = 'a boolean (true/false, or one of %s as a string)' % ', '.join(BOOL_WORDS)
# A variable whose name holds one of these words (between _ or the ends, any case) is a secret:
# its value is never shown. Words, not substrings: max_new_tokens is a count.
SECRET = re.compile(r'(^|_)(api_key|token|password|passwd|secret)(_|\Z)', re.IGNORECASE)
SHOWN_MAX = 300
# The credentials of a URL, from after its scheme:// to the last @ before the path: a password may
# hold spaces or an @ (stopping at the first would show its tail), while a / ends the authority for
# every tool the roles hand a URL to. A value that starts with user:password@ (a proxy written
# without its scheme) is masked alike. The scheme, host and port stay: they say which URL it is.
_CREDENTIALS = re.compile(r'([A-Za-z][A-Za-z0-9+.-]*://)[^/]*@|^[^\s/]*@')


def is_secret(name):
    return bool(SECRET.search(str(name)))


def mask_credentials(text):
    """text with the credentials of its URLs replaced by ***: http://***@proxy:3128."""
    return _CREDENTIALS.sub(lambda m: (m.group(1) or '') + '***@', text)


def _masked(value):
    if isinstance(value, str):
        return mask_credentials(value)
    if isinstance(value, Mapping):
        return dict((mask_credentials(str(key)), _masked(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [_masked(item) for item in value]
    return value


def shown(value, secret=False):
    """A value as a message shows it: JSON (control characters escaped), at most SHOWN_MAX characters."""
    if value is MISSING:
        return '(not set)'
    if secret:
        return '(hidden)'
    try:
        text = json.dumps(_masked(value), sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = json.dumps(str(value))
    return text if len(text) <= SHOWN_MAX else text[:SHOWN_MAX] + '...'


def problem(name, value, allowed, secret=None):
    """The message: `name = value is not allowed: allowed`."""
    secret = is_secret(name) if secret is None else secret
    return '%s = %s is not allowed: %s' % (name, shown(value, secret), allowed)


def is_string(value):
    return isinstance(value, str)


def is_list(value):
    return isinstance(value, (list, tuple))


def is_mapping(value):
    return isinstance(value, Mapping)


def is_bool(value):
    """A boolean or a string that `| bool` reads as one."""
    return isinstance(value, bool) or (isinstance(value, str) and value.lower() in BOOL_WORDS)


def as_bool(value):
    if isinstance(value, str):
        return value.lower() in ('true', 'yes', 'on', 'y', 't', '1')
    return bool(value)


def is_int(value, low=None, high=None):
    """An integer (or a string of digits, as `-e` passes it), within [low, high]; never a boolean."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and DIGITS.match(value):
        number = int(value)
    else:
        return False
    return (low is None or number >= low) and (high is None or number <= high)


def is_port(value):
    return is_int(value, 1, 65535)


def is_one_line(value):
    return isinstance(value, str) and not CONTROL.search(value)


def is_absolute_path(value):
    """An absolute path on one line, without . or .. segments."""
    return isinstance(value, str) and bool(ABSOLUTE.match(value)) and not DOT_SEGMENT.search(value)


def check(name, values, ok, allowed):
    """[] when ok(value) holds for values[name], else its one message (ok may raise on odd types)."""
    value = values.get(name, MISSING)
    try:
        good = value is not MISSING and ok(value)
    except (TypeError, ValueError, AttributeError, KeyError):
        good = False
    return [] if good else [problem(name, value, allowed)]


def os_family_check(role):
    """The check of the host's OS family for `role`, read through __<role>_os_family against
    __<role>_os_families: the one place a role refuses a host of another family (its validate.yml
    gathers the fact when the play did not)."""
    name, families_name = '__%s_os_family' % role, '__%s_os_families' % role

    def check_os_family(values, probes):
        families = [str(family) for family in values[families_name] or []]
        return check(name, values, lambda v: v in families,
                     "%s supports the OS families %s (the host's ansible_facts.os_family)" % (role, ', '.join(families)))

    return check_os_family


# The collection-wide switch that takes over a host set up by hand (README, "A host set up by hand"): no role's
# default, so one -e or inventory line sets it for runtime_env and sglang_server, each of which checks it.
ADOPT = 'inferops_adopt'


def check_adopt(values, probes):
    value = values.get(ADOPT, MISSING)
    return [] if value is MISSING or value is None or is_bool(value) else [
        problem(ADOPT, value, 'a boolean (true takes over what was set by hand; false, the default, refuses it)')]


def run_checks(checks, values, probes=None):
    """Every message of every check, in order."""
    found = []
    for one in checks:
        found.extend(one(values, probes or {}))
    return found
