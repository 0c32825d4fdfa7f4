# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection-wide network settings, inferops_proxy and inferops_ca_bundle, checked and turned
into an installer environment in one place for every role that downloads (README, "Proxy and CA");
the filters of plugins/filter/network.py and the roles' input checks both use it.

Proxy URLs may carry credentials: every message shows a value with its credentials masked (from
after the scheme:// to the URL's last @; the scheme, host and port stay), and the environment is
only ever passed to tasks with no_log or to modules that hide it.
"""

from __future__ import annotations

import json
import re

PROXY_KEYS = ('http_proxy', 'https_proxy', 'no_proxy')
URL = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*://[^\s]+\Z')
# A package index (pip's and uv's --index-url): over HTTP(S) or a local path.
INDEX_URL = re.compile(r'^(https?|file)://[^\s]+\Z')
CONTROL = re.compile(r'[\x00-\x1f\x7f]')
# A proxy's credentials: after each scheme:// (or from the start, for a URL written without one)
# to the last @ before the next URL. Wider than input_checks' mask, which stops at a /: a proxy URL
# has no path, so an @ after a / is still the password's (one written unencoded).
_SCHEME = r'[A-Za-z][A-Za-z0-9+.-]*://'
CREDENTIALS = re.compile(r'(?s)(^|%s)((?:(?!%s).)*)@' % (_SCHEME, _SCHEME))
ABSOLUTE = re.compile(r'^/[^\x00-\x1f\x7f]*\Z')
DOT_SEGMENT = re.compile(r'(^|/)\.\.?(/|$)')
# The variables these two replaced, refused by name (their values may hold credentials).
RETIRED = {
    'cuda_toolkit_proxy': 'inferops_proxy',
    'cuda_toolkit_ca_bundle': 'inferops_ca_bundle',
    'ml_env_proxy': 'inferops_proxy',
    'ml_env_no_proxy': 'inferops_proxy',
    'ml_env_ca_bundle': 'inferops_ca_bundle',
}


def masked(value):
    """A value as a message may show it: credentials replaced by ***, http://***@proxy:3128; the text
    around the URL stays (https_proxy=http://***@proxy:3128, as `-e` may pass it)."""
    return CREDENTIALS.sub(lambda m: m.group(1) + '***@', str(value))


def _shown(proxy):
    if isinstance(proxy, dict):
        return json.dumps(dict((str(k), masked(v)) for k, v in proxy.items()), sort_keys=True)
    return json.dumps(masked(proxy))


def network_problems(proxy, ca_bundle='', retired=None):
    """Every problem of the settings, one message each; [] when they are fine.

    proxy: inferops_proxy ({} or None: no proxy); ca_bundle: inferops_ca_bundle ('' or None: the
    tools' own stores); retired: the names of retired variables the inventory still sets.
    """
    problems = []
    retired = sorted(set(retired or []))
    if retired:
        instead = sorted(set(RETIRED.get(name, 'inferops_proxy') for name in retired))
        problems.append('%s (value hidden): no longer read, set %s instead, one setting for every role '
                        '(README, "Proxy and CA")' % (', '.join(retired), ' and '.join(instead)))
    proxy = {} if proxy is None else proxy
    ok = isinstance(proxy, dict) and not set(map(str, proxy)) - set(PROXY_KEYS)
    if ok:
        values = [v for v in proxy.values() if v is not None]
        ok = all(isinstance(v, str) and not CONTROL.search(v) for v in values)
        ok = ok and all(URL.match(proxy[k]) for k in ('http_proxy', 'https_proxy') if proxy.get(k))
    if not ok:
        problems.append('inferops_proxy = %s is not allowed: a mapping with keys among http_proxy, https_proxy and '
                        'no_proxy, each a string on one line or empty; http_proxy and https_proxy a URL like '
                        'http://proxy:3128 (or http://user:password@proxy:3128), no_proxy hosts like '
                        'localhost,.example.com' % _shown(proxy))
    ca_bundle = '' if ca_bundle is None else ca_bundle
    if not isinstance(ca_bundle, str) or (ca_bundle and (not ABSOLUTE.match(ca_bundle) or DOT_SEGMENT.search(ca_bundle))):
        problems.append('inferops_ca_bundle = %s is not allowed: "" (each tool\'s own CA store) or the absolute path '
                        'of a CA bundle on the host, without "." or ".." segments or control characters'
                        % json.dumps(ca_bundle if isinstance(ca_bundle, str) else str(ca_bundle)))
    return problems


def proxy_env(proxy):
    """The installers' proxy variables, in both spellings (apt and curl read the lower-case ones,
    some Python tools only the upper-case ones); empty values are left out."""
    env = {}
    for key, value in sorted((proxy or {}).items()):
        if value:
            env[key] = value
            env[key.upper()] = value
    return env
