"""The front page (issue 29): README.md stays within 9 KB (read as 9000 bytes, the stricter), opens with the
one-line flow that docs/architecture.md also opens with, whose node stages are the order roles/node runs them
in, and shows the three commands."""

import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(*path):
    with open(os.path.join(ROOT, *path), encoding='utf-8') as f:
        return f.read()


def flow(text):
    """The stages of the fenced line a page opens with, without their notes in parentheses."""
    match = re.search(r'\A# [^\n]+\n\n```\n([^\n]+)\n```\n', text)
    assert match, text[:200]
    return [re.sub(r'\s*\(.*\)', '', stage).strip() for stage in match.group(1).split('→')]


def node_stages():
    """The roles roles/node runs, in order, by their main entry point (runtime_env's start-up hook, an entry point
    of its own before ml_env, is the flow line's note in parentheses)."""
    imported = [task.get('ansible.builtin.import_role') or {} for task in yaml.safe_load(read('roles', 'node', 'tasks', 'main.yml'))]
    return [role['name'].replace('inferops.gpu.', '') for role in imported if role.get('name') and 'tasks_from' not in role]


def test_the_readme_is_at_most_9_kb():
    assert len(read('README.md').encode('utf-8')) <= 9000


def test_both_pages_open_with_the_same_flow_and_its_node_stages_are_the_node_roles_order():
    readme = flow(read('README.md'))
    assert readme == flow(read('docs', 'architecture.md'))
    assert [stage for stage in readme if stage in node_stages()] == node_stages()
    assert readme[len(node_stages()):] == ['sglang_gateway', 'rolling']


def test_the_readme_shows_the_three_commands():
    text = read('README.md')
    for playbook in ('site.yml', 'playbooks/rolling.yml', 'playbooks/verify.yml'):
        assert re.search(r'^ansible-playbook %s -l blackwell' % re.escape(playbook), text, re.M), playbook
