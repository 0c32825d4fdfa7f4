# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Processes and listening TCP sockets, read from /proc.

Every function takes the proc root (default /proc) so the unit tests run against a fake tree.
Processes come and go while /proc is read: one that vanishes (ENOENT, ESRCH) or that cannot be
read (EACCES without root) between listing and reading is skipped, never an error.
"""

from __future__ import annotations

import collections
import ipaddress
import os
import socket
import struct

PROC = '/proc'

Proc = collections.namedtuple('Proc', 'pid ppid pgid state starttime')

# /proc/N/stat states of a process that has exited but was not reaped yet.
_DEAD_STATES = ('Z', 'X', 'x')
# st column of /proc/net/tcp{,6}: TCP_LISTEN in include/net/tcp_states.h.
_TCP_LISTEN = '0A'
_SOCKET_LINK = 'socket:['


def _read_text(path):
    with open(path, 'rb') as handle:
        return handle.read().decode('utf-8', 'replace')


def _pids(proc):
    try:
        names = os.listdir(proc)
    except OSError:
        return []
    return [int(name) for name in names if name.isdigit() and name.isascii()]


def parse_stat(text):
    """A Proc from the text of /proc/N/stat.

    comm (field 2) is the executable name in parentheses and may itself hold spaces and ')':
    the fields after it start after the last ')'.
    """
    head, paren, rest = text.rpartition(')')
    if not paren or '(' not in head:
        raise ValueError('not a /proc/N/stat line: %r' % text[:80])
    fields = rest.split()
    # fields[0] is field 3 (state) of proc(5); starttime is field 22.
    return Proc(int(head.split('(', 1)[0]), int(fields[1]), int(fields[2]), fields[0], int(fields[19]))


def read_proc(pid, proc=PROC):
    """The Proc of one pid, or None when it is gone or unreadable."""
    try:
        return parse_stat(_read_text(os.path.join(proc, str(pid), 'stat')))
    except (OSError, ValueError, IndexError):
        return None


def process_table(proc=PROC):
    """{pid: Proc} of every process in /proc at the time of the read."""
    table = {}
    for pid in _pids(proc):
        info = read_proc(pid, proc)
        if info is not None:
            table[info.pid] = info
    return table


def cmdline(pid, proc=PROC):
    """The command line, arguments joined by spaces; '' for a gone process or a kernel thread."""
    try:
        with open(os.path.join(proc, str(pid), 'cmdline'), 'rb') as handle:
            raw = handle.read()
    except OSError:
        return ''
    # Programs that rewrite their title (setproctitle, nginx) pad with NULs or use spaces.
    return raw.rstrip(b'\0').replace(b'\0', b' ').decode('utf-8', 'replace').strip()


def tree(table, root_pid):
    """Sorted pids of root_pid and all its descendants in table; [] when root_pid is not in it."""
    if root_pid not in table:
        return []
    children = collections.defaultdict(list)
    for info in table.values():
        if info.ppid != info.pid:
            children[info.ppid].append(info.pid)
    seen = {root_pid}
    stack = [root_pid]
    while stack:
        for child in children[stack.pop()]:
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return sorted(seen)


def group(table, pgid):
    """Sorted pids of the process group pgid."""
    return sorted(pid for pid, info in table.items() if info.pgid == pgid)


def alive(pid, proc=PROC):
    """Whether pid runs: False when it is gone or a zombie."""
    info = read_proc(pid, proc)
    return info is not None and info.state not in _DEAD_STATES


def decode_address(text):
    """The address of a /proc/net/tcp{,6} column: the kernel prints the 32-bit words of the
    network-order address as host-order integers."""
    words = [struct.pack('=I', int(text[i:i + 8], 16)) for i in range(0, len(text), 8)]
    if len(words) == 1:
        return socket.inet_ntop(socket.AF_INET, words[0])
    if len(words) == 4:
        return socket.inet_ntop(socket.AF_INET6, b''.join(words))
    raise ValueError('not an address: %r' % text)


def parse_tcp_listeners(text):
    """[(address, port, inode)] of the LISTEN sockets of one /proc/net/tcp or tcp6 table."""
    found = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _TCP_LISTEN:
            continue
        try:
            address, port = fields[1].split(':')
            found.append((decode_address(address), int(port, 16), int(fields[9])))
        except ValueError:
            continue
    return found


def _tcp_tables(proc):
    # /proc/net is a link to /proc/self/net: the table of the reader's network namespace, the one
    # whose ports a server started from here competes for.
    for name in ('tcp', 'tcp6'):
        for path in (os.path.join(proc, 'net', name), os.path.join(proc, 'self', 'net', name)):
            try:
                yield _read_text(path)
                break
            except OSError:
                continue


def _ip(address):
    ip = ipaddress.ip_address(address)
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def conflicts(bound, host):
    """Whether a listener bound to address `bound` and a server binding `host` on the same port
    collide, as the kernel decides: the same address (IPv4-mapped IPv6 counts as IPv4), 0.0.0.0
    against any IPv4 address, :: against anything. A :: socket may be IPV6_V6ONLY and leave IPv4
    free, but /proc does not say so: it counts as taking both."""
    bound_ip, host_ip = _ip(bound), _ip(host)
    if bound_ip == host_ip:
        return True
    for wildcard, other in ((bound_ip, host_ip), (host_ip, bound_ip)):
        if wildcard.is_unspecified and (wildcard.version == 6 or other.version == 4):
            return True
    return False


def host_addresses(host):
    """The IP addresses of host: itself when it is one, else what the resolver returns.

    Raises ValueError naming the host when it does not resolve.
    """
    if not host:
        return ['0.0.0.0', '::']  # asyncio's create_server (uvicorn) binds both families for no host
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ValueError('%s does not resolve: %s' % (host, exc))
    return sorted(set(info[4][0].split('%')[0] for info in infos))


def socket_owners(inodes, proc=PROC):
    """{inode: sorted pids} of the processes holding a descriptor of each socket inode."""
    owners = collections.defaultdict(set)
    for pid in _pids(proc):
        fd_dir = os.path.join(proc, str(pid), 'fd')
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith(_SOCKET_LINK):
                try:
                    inode = int(target[len(_SOCKET_LINK):-1])
                except ValueError:
                    continue
                if inode in inodes:
                    owners[inode].add(pid)
    return dict((inode, sorted(pids)) for inode, pids in owners.items())


def listeners(port, host=None, proc=PROC):
    """Holders of a LISTEN TCP socket on port that collides with binding host (any address when
    host is None; host may be an address, a name, or a list of addresses).

    [{'pid', 'cmdline', 'address'}] sorted by pid, one entry per process and bound address (a
    socket shared after fork() has several holders). pid is None (cmdline '') for a socket no
    visible process holds: one in another PID namespace, or any other user's while not root.
    """
    if host is None:
        wanted = None
    elif isinstance(host, (list, tuple)):
        wanted = list(host)
    else:
        wanted = host_addresses(host)
    sockets = []
    for text in _tcp_tables(proc):
        for address, bound_port, inode in parse_tcp_listeners(text):
            if bound_port != port:
                continue
            if wanted is None or any(conflicts(address, item) for item in wanted):
                sockets.append((address, inode))
    owners = socket_owners(set(inode for address, inode in sockets), proc) if sockets else {}
    found = {}
    for address, inode in sockets:
        for pid in owners.get(inode) or [None]:
            found[(pid, address)] = {'pid': pid, 'cmdline': cmdline(pid, proc) if pid else '', 'address': address}
    return [found[key] for key in sorted(found, key=lambda key: (key[0] is None, key[0] or 0, key[1]))]
