# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ELF ABI check on real shared objects compiled from tests/fixtures/abi during the test."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from ansible_collections.inferops.gpu.plugins.module_utils.ml_env.abi import (
    AbiToolError,
    SymbolReader,
    check_abi,
    describe_missing,
    function_base,
    is_elf,
    parse_nm,
    source_name_key,
    top_namespace,
)

SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'fixtures', 'abi')
TOOLS = ('g++', 'nm', 'c++filt')
needs_toolchain = pytest.mark.skipif(not all(shutil.which(tool) for tool in TOOLS),
                                     reason='needs g++ and binutils')
# What sgl-kernel built against torch 2.9.1 imports and torch 2.10 no longer exports.
INT_LINE = '_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib'
INT_LINE_DEMANGLED = 'c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)'
UINT_LINE_DEMANGLED = 'c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, unsigned int, bool)'


def run(argv, data=None, binary_data=False):
    proc = subprocess.run(argv, input=data, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp('abi')
    paths = {}
    for name in ('provider', 'extension_mismatch', 'extension_match'):
        paths[name] = str(out / ('lib%s.so' % name))
        subprocess.run(['g++', '-shared', '-fPIC', '-o', paths[name], os.path.join(SOURCES, name + '.cpp')],
                       check=True)
    return paths


@pytest.mark.parametrize('mangled, namespace', [
    (INT_LINE, 'c10'),
    ('_ZN3c101fEj', 'c10'),
    ('_ZNK2at6Tensor3dimEv', 'at'),  # const member function
    ('_ZN5torch3jit5tracer9addInputsEPNS0_4NodeEPKcRKN2at6TensorE', 'torch'),
    ('_ZTVN3c1011VariableHooksE', 'c10'),  # vtable
    ('_ZTIN3c105ErrorE', 'c10'),  # typeinfo
    ('_ZThn16_N2at4impl3FooD0Ev', 'at'),  # thunk
    ('_ZGVZN3c103strEvE1s', 'c10'),  # guard variable of a local static
    ('_ZNSt6vectorIiSaIiEED1Ev', 'std'),
    ('_ZSt9terminatev', 'std'),
    ('_Z1fi', None),
    ('memcpy', None),
    ('_ZN3c10ab', 'c10'),  # truncated: still the scope it starts with
])
def test_top_namespace(mangled, namespace):
    assert top_namespace(mangled) == namespace


def test_parse_nm_splits_defined_undefined_and_drops_weak_and_versions():
    text = ('_ZN3c101fEi U\n_ZN3c101fEj T 10f9 a\n__gmon_start__ w\n'
            'memcpy@GLIBC_2.14 U\nfoo@@VERS_1 T 1 2\n_ZN3c104ListD0Ev W 1 2\n\n')
    defined, undefined = parse_nm(text)
    assert undefined == {'_ZN3c101fEi', 'memcpy'}
    assert defined == {'_ZN3c101fEj', 'foo', '_ZN3c104ListD0Ev'}


@pytest.mark.parametrize('demangled, base', [
    (INT_LINE_DEMANGLED, 'c10::cuda::c10_cuda_check_implementation'),
    ('c10::foo<int (*)(int)>(int)', 'c10::foo<int (*)(int)>'),
    ('c10::Bar::operator()(int) const', 'c10::Bar::operator()'),
    ('vtable for c10::Error', 'vtable for c10::Error'),
])
def test_function_base(demangled, base):
    assert function_base(demangled) == base


@needs_toolchain
def test_mismatch_is_reported_demangled_with_the_library_and_the_exported_overload(built):
    result = check_abi([built['extension_mismatch']], [built['provider']], SymbolReader(run))
    assert result['required'] == 2  # other::g is not torch's business
    by_name = dict((entry['demangled'], entry) for entry in result['missing'])
    assert set(by_name) == {'c10::f(int)', INT_LINE_DEMANGLED}
    entry = by_name[INT_LINE_DEMANGLED]
    assert entry['symbol'] == INT_LINE
    assert entry['library'] == built['extension_mismatch']
    assert entry['candidates'] == [UINT_LINE_DEMANGLED]
    assert by_name['c10::f(int)']['candidates'] == ['c10::f(unsigned int)']
    text = describe_missing(by_name['c10::f(int)'])
    assert text == '%s needs c10::f(int), which torch does not export (it exports c10::f(unsigned int))' % (
        built['extension_mismatch'])


@needs_toolchain
def test_matching_extension_passes(built):
    result = check_abi([built['extension_match']], [built['provider']], SymbolReader(run))
    assert result['missing'] == []
    assert result['required'] == 1
    assert result['checked'] == [built['extension_match']]


@needs_toolchain
def test_without_providers_every_torch_symbol_is_missing(built):
    result = check_abi([built['extension_mismatch']], [], SymbolReader(run))
    assert [entry['candidates'] for entry in result['missing']] == [[], []]


@needs_toolchain
def test_other_namespaces_can_be_required(built):
    result = check_abi([built['extension_mismatch']], [built['provider']], SymbolReader(run), namespaces=['other'])
    assert [entry['demangled'] for entry in result['missing']] == ['other::g(int)']


@needs_toolchain
def test_nm_failure_names_the_file(tmp_path):
    bogus = tmp_path / 'broken.so'
    bogus.write_bytes(b'\x7fELF not really')
    with pytest.raises(AbiToolError, match='broken.so'):
        SymbolReader(run).symbols(str(bogus))


def test_is_elf(tmp_path):
    (tmp_path / 'a.so').write_bytes(b'\x7fELF\x02\x01')
    (tmp_path / 'b.so').write_text('INPUT(-lfoo)\n')  # a linker script named .so
    assert is_elf(str(tmp_path / 'a.so'))
    assert not is_elf(str(tmp_path / 'b.so'))
    assert not is_elf(str(tmp_path / 'missing.so'))


@pytest.mark.parametrize('base, key', [
    ('c10::cuda::c10_cuda_check_implementation', '29c10_cuda_check_implementation'),
    ('c10::foo<int (*)(int)>', '3foo'),
    ('c10::Bar::operator()', '3Bar'),
    ('c10::Bar<at::Tensor>::~Bar', '3Bar'),
    ('vtable for c10::Error', '5Error'),
    ('operator new', None),
])
def test_source_name_key(base, key):
    assert source_name_key(base) == key


class RecordingRun:
    """Runs for real and records what each call was given."""

    def __init__(self):
        self.calls = []

    def __call__(self, argv, data=None, binary_data=False):
        self.calls.append((list(argv), data))
        return run(argv, data=data)


@needs_toolchain
def test_torch_sized_provider_missing_symbol_is_named_with_its_candidate_in_seconds(built, torch_sized_provider):
    recorder = RecordingRun()
    reader = SymbolReader(recorder)
    assert len(reader.symbols(torch_sized_provider)[0]) > 100000
    started = time.monotonic()
    result = check_abi([built['extension_mismatch']], [torch_sized_provider], reader)
    elapsed = time.monotonic() - started
    by_name = dict((entry['demangled'], entry) for entry in result['missing'])
    assert by_name[INT_LINE_DEMANGLED]['candidates'] == [UINT_LINE_DEMANGLED]
    assert by_name['c10::f(int)']['candidates'] == ['c10::f(unsigned int)']
    assert elapsed < 10, elapsed
    demangle_calls = [argv for argv, data in recorder.calls if argv[0] == 'c++filt']
    # Nothing goes through stdin, and only the missing names and their namesakes are demangled.
    assert all(data is None for argv, data in recorder.calls)
    assert sum(len(argv) - 2 for argv in demangle_calls) <= 6


@needs_toolchain
def test_demangle_splits_many_names_into_argument_chunks():
    recorder = RecordingRun()
    names = ['_ZN3c104cuda%d%sEi' % (len('fn%06d' % i), 'fn%06d' % i) for i in range(20000)]
    lines = SymbolReader(recorder).demangle(names)
    assert lines[0] == 'c10::cuda::fn000000(int)' and lines[-1] == 'c10::cuda::fn019999(int)'
    assert len(lines) == 20000 and len(recorder.calls) > 1
    assert max(sum(len(arg) + 1 for arg in argv) for argv, data in recorder.calls) < 70 * 1024
