# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every import of the collection's own code goes downward (docs/architecture.md, "Layers").

module_utils is one folder per area; an area imports only from the areas below it, never from a
sibling or from above; the plugins (modules, action, filter, lookup) import module_utils and never
one another, only the controller's shared code in plugin_utils (which imports module_utils only).
The table is drawn in docs/architecture.md too: the test fails when the two differ,
and when a module_utils file or folder is not in the table.
"""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PACKAGE = 'ansible_collections.inferops.gpu.plugins.'

# Each area of module_utils and the areas it may import, lowest first.
LAYERS = {
    '_common': (),
    'gpu': ('_common',),
    'cuda_toolkit': ('_common',),
    'ml_env': ('_common',),
    'runtime_env': ('_common',),
    'sglang': ('gpu', '_common'),
    'fleet': ('sglang', 'gpu', 'cuda_toolkit', 'ml_env', 'runtime_env', '_common'),
}
PLUGIN_TYPES = ('modules', 'action', 'filter', 'lookup', 'doc_fragments')
# The controller's code shared by plugins (ansible-core's plugin_utils): above module_utils, below the plugins.
PLUGIN_UTILS = 'plugin_utils'


def _imported(tree):
    """(line, 'module_utils/AREA' or a plugin type, the import as written) of each import of ours."""
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
            parts = node.module[len(PACKAGE):].split('.')
            if parts == ['module_utils']:
                names = [['module_utils', alias.name] for alias in node.names]
            else:
                names = [parts]
        elif isinstance(node, ast.Import):
            names = [alias.name[len(PACKAGE):].split('.') for alias in node.names if alias.name.startswith(PACKAGE)]
        for parts in names:
            target = 'module_utils/' + parts[1] if parts[0] == 'module_utils' and len(parts) > 1 else parts[0]
            yield node.lineno, target, '.'.join(parts)


def violations(plugins):
    """Every import that does not go downward, and every module_utils file outside the table."""
    found = []
    for directory, _dirs, files in os.walk(plugins):
        for name in sorted(files):
            if not name.endswith('.py'):
                continue
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, plugins).split(os.sep)
            if rel[0] == 'module_utils':
                if len(rel) != 3 or rel[1] not in LAYERS:
                    if name != '__init__.py' or len(rel) != 2:
                        found.append('%s: not in an area of the table' % '/'.join(rel))
                    continue
                source, allowed = 'module_utils/' + rel[1], ['module_utils/' + a for a in LAYERS[rel[1]]]
            elif rel[0] in PLUGIN_TYPES:
                source, allowed = rel[0], ['module_utils/' + a for a in LAYERS] + [PLUGIN_UTILS]
            elif rel[0] == PLUGIN_UTILS:
                source, allowed = PLUGIN_UTILS, ['module_utils/' + a for a in LAYERS]
            else:
                continue
            with open(path, encoding='utf-8') as handle:
                tree = ast.parse(handle.read(), path)
            for line, target, written in _imported(tree):
                if target != source and target not in allowed:
                    found.append('%s:%d imports %s (%s may import %s)'
                                 % ('/'.join(rel), line, written, source, ', '.join(allowed) or 'nothing of ours'))
    return found


def test_every_import_of_the_collection_goes_downward():
    assert violations(os.path.join(ROOT, 'plugins')) == []


def test_the_table_has_no_cycle_and_lists_only_lower_areas():
    order = list(LAYERS)
    for area, below in LAYERS.items():
        assert all(order.index(lower) < order.index(area) for lower in below), area


def test_architecture_md_draws_the_same_layers():
    with open(os.path.join(ROOT, 'docs', 'architecture.md'), encoding='utf-8') as handle:
        text = handle.read()
    for area, below in LAYERS.items():
        line = '%-12s -> %s' % (area, ', '.join(below) or '(nothing of ours)')
        assert line in text, 'docs/architecture.md lacks the line %r' % line


@pytest.mark.parametrize('area, source, expected', [
    # Upward: a lower area importing a higher one.
    ('gpu', 'from ansible_collections.inferops.gpu.plugins.module_utils.sglang.launch import spawn\n',
     'module_utils/gpu/x.py:1 imports module_utils.sglang.launch'),
    # Sideways: two areas of the same level.
    ('ml_env', 'from ansible_collections.inferops.gpu.plugins.module_utils import cuda_toolkit\n',
     'module_utils/ml_env/x.py:1 imports module_utils.cuda_toolkit'),
    # A module_utils file importing a plugin.
    ('_common', 'import ansible_collections.inferops.gpu.plugins.modules.gpu_info\n',
     'module_utils/_common/x.py:1 imports modules.gpu_info'),
])
def test_an_upward_or_sideways_import_is_named(tmp_path, area, source, expected):
    folder = tmp_path / 'module_utils' / area
    folder.mkdir(parents=True)
    (folder / 'x.py').write_text(source)
    found = violations(str(tmp_path))
    assert len(found) == 1 and found[0].startswith(expected), found


def test_a_plugin_importing_another_plugin_is_named(tmp_path):
    (tmp_path / 'modules').mkdir()
    (tmp_path / 'modules' / 'x.py').write_text('from ansible_collections.inferops.gpu.plugins.filter.sglang import f\n')
    assert violations(str(tmp_path))[0].startswith('modules/x.py:1 imports filter.sglang')


def test_a_file_outside_the_areas_is_named(tmp_path):
    (tmp_path / 'module_utils' / 'misc').mkdir(parents=True)
    (tmp_path / 'module_utils' / 'flat.py').write_text('')
    (tmp_path / 'module_utils' / 'misc' / 'y.py').write_text('')
    assert violations(str(tmp_path)) == ['module_utils/flat.py: not in an area of the table',
                                         'module_utils/misc/y.py: not in an area of the table']


def test_plugin_utils_never_imports_a_plugin(tmp_path):
    (tmp_path / 'plugin_utils').mkdir()
    (tmp_path / 'plugin_utils' / 'x.py').write_text('from ansible_collections.inferops.gpu.plugins.lookup import role_setting\n')
    assert violations(str(tmp_path))[0].startswith('plugin_utils/x.py:1 imports lookup (plugin_utils may import module_utils')
