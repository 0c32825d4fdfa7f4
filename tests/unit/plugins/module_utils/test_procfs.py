# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""procfs over a fake /proc built in tmp_path, and over the real one with real sockets and processes."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import time

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils._common import procfs
from ansible_collections.inferops.gpu.plugins.module_utils._common.procfs import Proc

TCP_HEADER = ('  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n')
# Lines as a little-endian kernel prints them (captured on x86_64): 127.0.0.1, ::1, ::ffff:127.0.0.1, ::.
LOOPBACK4 = '0100007F'
LOOPBACK6 = '00000000000000000000000001000000'
MAPPED_LOOPBACK = '0000000000000000FFFF00000100007F'
ANY4 = '00000000'
ANY6 = '0' * 32


class FakeProc:
    """A /proc tree: processes with stat, cmdline and socket descriptors, and the tcp tables."""

    def __init__(self, root, net_dir='net'):
        self.root = root
        self.net = root.joinpath(*net_dir.split('/'))
        self.net.mkdir(parents=True)
        self.tables = {'tcp': [TCP_HEADER], 'tcp6': [TCP_HEADER]}
        self.flush()

    @property
    def path(self):
        return str(self.root)

    def add(self, pid, comm='python3', ppid=1, pgid=None, state='S', starttime=4242, argv=None, sockets=()):
        directory = self.root / str(pid)
        (directory / 'fd').mkdir(parents=True)
        rest = [state, ppid, pgid or pid, pgid or pid, 0, -1, 4194560, 0, 0, 0, 0, 7, 3, 0, 0, 20, 0, 1, 0,
                starttime, 123456, 789]
        (directory / 'stat').write_text('%d (%s) %s\n' % (pid, comm, ' '.join(str(f) for f in rest)))
        raw = b''.join(arg.encode() + b'\0' for arg in (argv if argv is not None else [comm]))
        (directory / 'cmdline').write_bytes(raw)
        for fd, inode in enumerate(sockets, 3):
            os.symlink('socket:[%d]' % inode, str(directory / 'fd' / str(fd)))
        os.symlink('/dev/null', str(directory / 'fd' / '0'))
        return directory

    def listen(self, address_hex, port, inode, state='0A'):
        table = 'tcp' if len(address_hex) == 8 else 'tcp6'
        remote = '0' * len(address_hex)
        self.tables[table].append('%4d: %s:%04X %s:0000 %s 00000000:00000000 00:00000000 00000000     0        0 %d 1 '
                                  '0000000000000000 100 0 0 10 0\n'
                                  % (len(self.tables[table]) - 1, address_hex, port, remote, state, inode))
        self.flush()

    def flush(self):
        for name, lines in self.tables.items():
            (self.net / name).write_text(''.join(lines))


@pytest.fixture
def fake(tmp_path):
    return FakeProc(tmp_path / 'proc')


# /proc/N/stat

@pytest.mark.parametrize('comm', ['python3', 'my proc', 'weird) (name', 'a)b)', ') ', 'x\ny'])
def test_stat_comm_with_spaces_and_parens(fake, comm):
    fake.add(77, comm=comm, ppid=5, pgid=70, state='R', starttime=99)
    assert procfs.process_table(fake.path) == {77: Proc(77, 5, 70, 'R', 99)}


def test_stat_of_the_real_test_process():
    with open('/proc/self/stat') as handle:
        info = procfs.parse_stat(handle.read())
    assert (info.pid, info.ppid, info.pgid, info.state) == (os.getpid(), os.getppid(), os.getpgrp(), 'R')
    assert info.starttime > 0


@pytest.mark.parametrize('text', ['', 'garbage', '12 (x) S 1', '12 x) S 1 2 3'])
def test_stat_garbage_is_a_value_error(text):
    with pytest.raises((ValueError, IndexError)):
        procfs.parse_stat(text)


def test_table_skips_what_is_not_a_readable_process(fake):
    fake.add(10)
    fake.add(11, ppid=10)
    (fake.root / '12').mkdir()                       # gone between readdir and open: no stat
    (fake.root / '13').mkdir()
    (fake.root / '13' / 'stat').mkdir()              # unreadable (EISDIR stands for EACCES)
    (fake.root / '14').mkdir()
    (fake.root / '14' / 'stat').write_text('')       # exited while being read
    (fake.root / 'self').mkdir()
    (fake.root / 'sys').mkdir()
    (fake.root / '\u0661\u0662').mkdir()              # Arabic-Indic digits are isdigit() too
    assert sorted(procfs.process_table(fake.path)) == [10, 11]


@pytest.mark.parametrize('error', [errno.ENOENT, errno.ESRCH, errno.EACCES])
def test_table_survives_a_process_vanishing_mid_read(fake, monkeypatch, error):
    fake.add(10)
    fake.add(11)
    real = procfs._read_text

    def flaky(path):
        if path.startswith(os.path.join(fake.path, '11')):
            raise OSError(error, os.strerror(error), path)
        return real(path)

    monkeypatch.setattr(procfs, '_read_text', flaky)
    assert sorted(procfs.process_table(fake.path)) == [10]
    assert procfs.alive(11, fake.path) is False


def test_missing_proc_root_is_an_empty_table(tmp_path):
    assert procfs.process_table(str(tmp_path / 'nope')) == {}


# cmdline

def test_cmdline(fake):
    fake.add(10, argv=['python', '-m', 'sglang.launch_server', '--model-path', '/m y'])
    fake.add(11, argv=[])                               # kernel thread
    (fake.add(12) / 'cmdline').write_bytes(b'nginx: master process /usr/sbin/nginx\0\0\0\0')  # setproctitle
    (fake.add(13) / 'cmdline').write_bytes(b'caf\xc3\xa9 \xff\0')
    assert procfs.cmdline(10, fake.path) == 'python -m sglang.launch_server --model-path /m y'
    assert procfs.cmdline(11, fake.path) == ''
    assert procfs.cmdline(12, fake.path) == 'nginx: master process /usr/sbin/nginx'
    assert procfs.cmdline(13, fake.path) == 'caf\u00e9 \ufffd'
    assert procfs.cmdline(99, fake.path) == ''


def test_cmdline_of_the_real_test_process():
    assert 'pytest' in procfs.cmdline(os.getpid()) or 'python' in procfs.cmdline(os.getpid())


# tree, group, alive

def table_of(*rows):
    return dict((row[0], Proc(*row)) for row in rows)


TABLE = table_of(
    (1, 0, 1, 'S', 1),
    (100, 1, 100, 'S', 10),    # launcher
    (101, 100, 100, 'S', 11),  # rank 0
    (102, 100, 100, 'S', 11),  # rank 1
    (103, 101, 103, 'S', 12),  # a helper of rank 0 in its own group
    (200, 1, 200, 'S', 20),    # unrelated
    (201, 200, 100, 'S', 21),  # unrelated, in group 100 by setpgid
)


def test_tree():
    assert procfs.tree(TABLE, 100) == [100, 101, 102, 103]
    assert procfs.tree(TABLE, 101) == [101, 103]
    assert procfs.tree(TABLE, 103) == [103]
    assert procfs.tree(TABLE, 4242) == []
    assert procfs.tree(TABLE, 1) == sorted(TABLE)


def test_tree_survives_a_cycle():
    # A pid reused between two reads can make a loop of parents; the walk must end.
    assert procfs.tree(table_of((5, 6, 5, 'S', 1), (6, 5, 5, 'S', 1)), 5) == [5, 6]


def test_group():
    assert procfs.group(TABLE, 100) == [100, 101, 102, 201]
    assert procfs.group(TABLE, 103) == [103]
    assert procfs.group(TABLE, 4242) == []


def test_alive(fake):
    fake.add(10, state='S')
    fake.add(11, state='Z')
    fake.add(12, state='D')
    fake.add(13, state='X')
    assert [procfs.alive(pid, fake.path) for pid in (10, 11, 12, 13, 14)] == [True, False, True, False, False]


def test_real_process_table_and_a_real_zombie():
    child = subprocess.Popen(['true'])
    try:
        deadline = time.monotonic() + 10
        while procfs.alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        table = procfs.process_table()
        assert table[child.pid].state == 'Z' and table[child.pid].ppid == os.getpid()
        assert not procfs.alive(child.pid)
        assert procfs.alive(os.getpid())
        assert child.pid in procfs.tree(table, os.getpid())
        assert os.getpid() in procfs.group(table, os.getpgrp())
    finally:
        child.wait()
    assert not procfs.alive(child.pid)


# addresses

@pytest.mark.parametrize('text, address', [
    (LOOPBACK4, '127.0.0.1'),
    (ANY4, '0.0.0.0'),
    ('0500000A', '10.0.0.5'),
    (LOOPBACK6, '::1'),
    (MAPPED_LOOPBACK, '::ffff:127.0.0.1'),
    (ANY6, '::'),
])
def test_decode_address(text, address):
    assert procfs.decode_address(text) == address


@pytest.mark.parametrize('bound, host, expected', [
    ('127.0.0.1', '127.0.0.1', True),
    ('127.0.0.1', '10.0.0.5', False),
    ('0.0.0.0', '10.0.0.5', True),
    ('::', '127.0.0.1', True),
    ('::', '::1', True),
    ('::1', '127.0.0.1', False),
    ('::ffff:127.0.0.1', '127.0.0.1', True),
    ('::ffff:0.0.0.0', '10.0.0.5', True),
    ('10.0.0.5', '0.0.0.0', True),
    ('::1', '::', True),
    ('0.0.0.0', '::1', False),
    ('::1', '0.0.0.0', False),
    ('0.0.0.0', '::', True),
])
def test_conflicts(bound, host, expected):
    assert procfs.conflicts(bound, host) is expected


def test_host_addresses(monkeypatch):
    assert procfs.host_addresses('127.0.0.1') == ['127.0.0.1']
    assert procfs.host_addresses('::0001') == ['::1']
    assert procfs.host_addresses('') == ['0.0.0.0', '::']
    assert '127.0.0.1' in procfs.host_addresses('localhost')

    def unknown(*args):
        raise socket.gaierror(socket.EAI_NONAME, 'Name or service not known')

    monkeypatch.setattr(socket, 'getaddrinfo', unknown)
    with pytest.raises(ValueError, match='^gpu-1.example does not resolve: .*Name or service not known'):
        procfs.host_addresses('gpu-1.example')


# listeners on the fake tree

@pytest.fixture
def ports(fake):
    fake.add(70, comm='nginx', argv=['nginx: master process /usr/sbin/nginx'], sockets=[1001, 1002])
    fake.add(71, comm='nginx', ppid=70, pgid=70, argv=['nginx: worker process'], sockets=[1001, 1002])
    fake.add(80, argv=['python', '-m', 'http.server', '8080'], sockets=[2001])
    fake.add(81, argv=['sshd'], sockets=[3001])
    fake.add(90, argv=['python', 'client.py'], sockets=[4001])
    fake.listen(ANY4, 80, 1001)
    fake.listen(ANY6, 80, 1002)
    fake.listen(LOOPBACK4, 8080, 2001)
    fake.listen(LOOPBACK6, 22, 3001)
    fake.listen(LOOPBACK4, 30000, 4001, state='01')      # an established connection, not a listener
    fake.listen(MAPPED_LOOPBACK, 30000, 5001)            # nobody visible holds it
    return fake


def holders(found):
    return [(item['pid'], item['address']) for item in found]


def test_listeners_wildcards_hold_every_host(ports):
    expected = [(70, '0.0.0.0'), (70, '::'), (71, '0.0.0.0'), (71, '::')]
    assert holders(procfs.listeners(80, '127.0.0.1', ports.path)) == expected
    assert holders(procfs.listeners(80, None, ports.path)) == expected
    found = procfs.listeners(80, '10.1.2.3', ports.path)
    assert found[0] == {'pid': 70, 'cmdline': 'nginx: master process /usr/sbin/nginx', 'address': '0.0.0.0'}


def test_listeners_ipv6_host_and_ipv4_wildcard(ports):
    # 0.0.0.0 does not take ::1, :: does.
    assert holders(procfs.listeners(80, '::1', ports.path)) == [(70, '::'), (71, '::')]
    assert holders(procfs.listeners(22, '::1', ports.path)) == [(81, '::1')]
    assert procfs.listeners(22, '127.0.0.1', ports.path) == []


def test_listeners_specific_address(ports):
    assert holders(procfs.listeners(8080, '127.0.0.1', ports.path)) == [(80, '127.0.0.1')]
    assert procfs.listeners(8080, '10.0.0.5', ports.path) == []
    assert holders(procfs.listeners(8080, '0.0.0.0', ports.path)) == [(80, '127.0.0.1')]
    assert holders(procfs.listeners(8080, ['10.0.0.5', '127.0.0.1'], ports.path)) == [(80, '127.0.0.1')]
    assert procfs.listeners(9999, None, ports.path) == []


def test_listeners_unowned_socket_and_mapped_address(ports):
    # Only a LISTEN socket counts; the v4-mapped one is held by no visible process.
    assert procfs.listeners(30000, '127.0.0.1', ports.path) == [
        {'pid': None, 'cmdline': '', 'address': '::ffff:127.0.0.1'}]


def test_listeners_read_the_tables_under_self_net(tmp_path):
    fake = FakeProc(tmp_path / 'proc', net_dir='self/net')
    fake.add(5, argv=['srv'], sockets=[77])
    fake.listen(LOOPBACK4, 30000, 77)
    assert holders(procfs.listeners(30000, '127.0.0.1', fake.path)) == [(5, '127.0.0.1')]


def test_listeners_survive_descriptors_vanishing(ports, monkeypatch):
    real_listdir, real_readlink = os.listdir, os.readlink

    def listdir(path):
        if path == os.path.join(ports.path, '70', 'fd'):
            raise PermissionError(errno.EACCES, 'Permission denied', path)
        return real_listdir(path)

    def readlink(path):
        if path.startswith(os.path.join(ports.path, '71', 'fd')):
            raise FileNotFoundError(errno.ENOENT, 'No such file or directory', path)
        return real_readlink(path)

    monkeypatch.setattr(os, 'listdir', listdir)
    monkeypatch.setattr(os, 'readlink', readlink)
    assert holders(procfs.listeners(8080, '127.0.0.1', ports.path)) == [(80, '127.0.0.1')]
    # Holders that cannot be read leave a socket without a known owner, not a missing one.
    assert holders(procfs.listeners(80, '127.0.0.1', ports.path)) == [(None, '0.0.0.0'), (None, '::')]


def test_listeners_ignore_broken_table_lines(fake):
    fake.add(5, sockets=[77])
    fake.tables['tcp'].append('   9: zzzz:zz 00000000:0000 0A 0 0 0 0 0 0 88\n   10: short\n')
    fake.listen(LOOPBACK4, 30000, 77)
    assert holders(procfs.listeners(30000, None, fake.path)) == [(5, '127.0.0.1')]


# listeners on the real /proc

def test_listeners_find_a_real_socket_of_this_process():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        found = procfs.listeners(port, '127.0.0.1')
        assert [(item['pid'], item['address']) for item in found] == [(os.getpid(), '127.0.0.1')]
        assert found[0]['cmdline'] == procfs.cmdline(os.getpid()) != ''
        assert procfs.listeners(port, '127.0.0.2') == []
        assert [item['pid'] for item in procfs.listeners(port, '0.0.0.0')] == [os.getpid()]
    assert procfs.listeners(port, '127.0.0.1') == []


def test_listeners_find_a_real_ipv6_wildcard_socket():
    if not socket.has_ipv6:
        pytest.skip('no IPv6')
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(('::', 0))
    except OSError as exc:
        sock.close()
        pytest.skip('cannot bind [::]: %s' % exc)
    with sock:
        sock.listen(1)
        port = sock.getsockname()[1]
        assert [(item['pid'], item['address']) for item in procfs.listeners(port, '127.0.0.1')] == [(os.getpid(), '::')]
