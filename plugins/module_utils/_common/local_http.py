# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One plain-HTTP request with http.client, for the servers the modules probe on their own host.

ansible.module_utils.urls.open_url builds an SSL context and a handler chain for every request,
about 35 ms of CPU each even for http://; the health gate makes four requests between the
server's ready line and its verdict, so that cost is most of the gate's delay. No proxies, no
redirects. Returns (status or None, text, error) like the modules' transport: status None means
no HTTP answer (refused, reset, timed out).
"""

from __future__ import annotations

import http.client
import socket
from urllib.parse import urlsplit


def request(method, url, headers, body, timeout):
    parts = urlsplit(url)
    if parts.scheme != 'http' or not parts.hostname:
        raise ValueError('not a plain http URL: %s' % url)
    path = parts.path or '/'
    if parts.query:
        path += '?' + parts.query
    payload = body.encode('utf-8') if isinstance(body, str) else body
    connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    try:
        connection.request(method, path, body=payload, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read().decode('utf-8', 'replace'), None
    except (socket.timeout, OSError) as exc:
        return None, '', str(exc) or type(exc).__name__
    except http.client.HTTPException as exc:
        # RemoteDisconnected / BadStatusLine: a dying server dropped the socket.
        return None, '', '%s: %s' % (type(exc).__name__, exc)
    finally:
        connection.close()
