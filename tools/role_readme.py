"""Each role README's variables section, generated from the role's meta/argument_specs.yml.

    python tools/role_readme.py --write    rewrite the section of every role
    python tools/role_readme.py --check    exit 1 naming each role whose README differs

For every role directory under roles/ with a meta/argument_specs.yml (a role without one is
skipped), the section between the marker lines BEGIN and END below lists every option of the
entry point `main` (suboptions as `option.suboption`): name, type, default, required and the
description, Ansible's doc markup turned into Markdown. Another entry point gets a sub-section
when its options are not main's own. The default is the spec's `default`, else the value in
defaults/main.yml, else none. Options are listed in the spec's order; the output depends on the
spec and defaults files only. A README without the markers gets the section at its end on --write.
Standard library and PyYAML only; tools/package-check.sh runs --check (`make package`).
"""

import argparse
import json
import os
import re
import sys

import yaml

BEGIN = '<!-- BEGIN GENERATED: role_readme.py -->'
END = '<!-- END GENERATED: role_readme.py -->'
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NONE = '\u2014'  # an em dash: no default

# Ansible's doc markup. Classic macros end at the first `)`; the semantic ones (O, V, E, P, RV)
# take `\` as an escape for `)` and `\`.
MACRO = re.compile(r'\b(RV|HORIZONTALLINE|[BCEILMOPRUV])(\()?')
ESCAPING = {'O', 'V', 'E', 'P', 'RV'}


def plain_text(text):
    """Markdown-safe plain text: a table cell's `|`, and `<`, `*`, `\\` that Markdown would take as markup."""
    return re.sub(r'([\\|<*])', r'\\\1', text)


def code(text):
    """A code span in a table cell (its `|` escaped, as GFM tables want even inside spans)."""
    text = text.replace('|', '\\|')
    if '`' in text:
        return '`` %s ``' % text
    return '`%s`' % text


def strip_plugin(name):
    """O(fqcn#type:name) and RV(...) name another plugin's option: keep the option's name."""
    return name.split('#', 1)[1].split(':')[-1] if '#' in name else name


def _macro_content(text, start, escaping):
    """The content of a macro whose `(` ends at start, and the index after its `)`; None if unclosed."""
    if not escaping:
        end = text.find(')', start)
        return (None, start) if end < 0 else (text[start:end], end + 1)
    out = []
    i = start
    while i < len(text):
        char = text[i]
        if char == '\\' and i + 1 < len(text) and text[i + 1] in '\\)':
            out.append(text[i + 1])
            i += 2
        elif char == ')':
            return ''.join(out), i + 1
        else:
            out.append(char)
            i += 1
    return None, start


def convert_markup(text):
    """Ansible doc markup (C(), V(), O(), I(), B(), L(), U(), ...) as Markdown, the rest escaped."""
    text = re.sub(r'\s+', ' ', text).strip()
    out = []
    pos = 0
    while True:
        match = MACRO.search(text, pos)
        if not match:
            out.append(plain_text(text[pos:]))
            return ''.join(out)
        name = match.group(1)
        if name == 'HORIZONTALLINE':
            if match.group(2):  # not the macro, a word that happens to start like it
                out.append(plain_text(text[pos:match.end()]))
                pos = match.end()
                continue
            out.append(plain_text(text[pos:match.start()]) + ' ' + NONE + ' ')
            pos = match.end()
            continue
        if not match.group(2):
            out.append(plain_text(text[pos:match.end()]))
            pos = match.end()
            continue
        content, end = _macro_content(text, match.end(), name in ESCAPING)
        if content is None:
            out.append(plain_text(text[pos:match.end()]))
            pos = match.end()
            continue
        out.append(plain_text(text[pos:match.start()]))
        out.append(_render_macro(name, content))
        pos = end


def _render_macro(name, content):
    if name in ('C', 'V', 'E', 'M'):
        return code(content)
    if name in ('O', 'RV'):
        return code(strip_plugin(content))
    if name == 'P':
        return code(content.split('#', 1)[0])
    if name == 'I':
        return '*%s*' % plain_text(content)
    if name == 'B':
        return '**%s**' % plain_text(content)
    if name == 'U':
        return '[%s](%s)' % (plain_text(content), content.strip())
    if name == 'L':
        label, _sep, url = content.rpartition(',')
        return '[%s](%s)' % (plain_text(label.strip()), url.strip())
    # R(text, anchor): a reference inside ansible-doc's own pages; the text is what reads.
    return plain_text(content.rpartition(',')[0].strip() or content)


def _is_plain_scalar(text):
    """Whether a string reads back as itself in YAML flow style, unquoted."""
    if not text or text != text.strip() or re.search(r'[\[\]{},#"\']|: |^[-?:!&*|>%@`]', text):
        return False
    try:
        return yaml.safe_load(text) == text
    except yaml.YAMLError:
        return False


def value_text(value):
    """A default as YAML flow style, strings quoted only where YAML would read them otherwise."""
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        value = re.sub(r'\s+', ' ', value).strip() if '{{' in value or '{%' in value else value
        return value if _is_plain_scalar(value) else json.dumps(value)
    if isinstance(value, (list, tuple)):
        return '[%s]' % ', '.join(value_text(item) for item in value)
    if isinstance(value, dict):
        return '{%s}' % ', '.join('%s: %s' % (value_text(k), value_text(v)) for k, v in value.items())
    return json.dumps(value)


def type_text(spec):
    kind = spec.get('type', 'str')
    if kind == 'list' and spec.get('elements'):
        return 'list of %s' % spec['elements']
    return kind


def description_text(spec):
    description = spec.get('description') or ''
    if isinstance(description, str):
        description = [description]
    parts = [convert_markup(str(item)) for item in description]
    choices = spec.get('choices')
    if choices:
        names = list(choices) if isinstance(choices, dict) else choices
        parts.append('Choices: %s.' % ', '.join(code(value_text(choice)) for choice in names))
    if spec.get('no_log'):
        parts.append('Never logged (`no_log`).')
    return ' '.join(part for part in parts if part)


def option_rows(options, defaults, prefix=''):
    rows = []
    for name, spec in (options or {}).items():
        spec = spec or {}
        if 'default' in spec:
            default = code(value_text(spec['default']))
        elif not prefix and name in defaults:
            default = code(value_text(defaults[name]))
        else:
            default = NONE
        rows.append('| %s | %s | %s | %s | %s |' % (
            code(prefix + name), type_text(spec), default, 'yes' if spec.get('required') else 'no',
            description_text(spec)))
        sub = spec.get('options') or spec.get('suboptions')
        if sub:
            rows.extend(option_rows(sub, defaults, prefix + name + '.'))
    return rows


def table(options, defaults):
    return ['| option | type | default | required | description |',
            '| --- | --- | --- | --- | --- |'] + option_rows(options, defaults)


def render(role_dir):
    """The generated section of one role, markers included, or None for a role without a spec."""
    spec_path = os.path.join(role_dir, 'meta', 'argument_specs.yml')
    if not os.path.isfile(spec_path):
        return None
    with open(spec_path, encoding='utf-8') as handle:
        specs = (yaml.safe_load(handle) or {}).get('argument_specs') or {}
    defaults = {}
    defaults_path = os.path.join(role_dir, 'defaults', 'main.yml')
    if os.path.isfile(defaults_path):
        with open(defaults_path, encoding='utf-8') as handle:
            defaults = yaml.safe_load(handle) or {}
    main = (specs.get('main') or {}).get('options') or {}
    same, none, own = [], [], []
    for entry in specs:
        if entry == 'main':
            continue
        options = (specs[entry] or {}).get('options') or {}
        if not options:
            none.append(entry)
        elif options == main:
            same.append(entry)
        else:
            own.append(entry)
    lines = [BEGIN, '## Variables', '',
             'Generated from `meta/argument_specs.yml` by `tools/role_readme.py`: edit the spec, then run'
             ' `python tools/role_readme.py --write`. A default is the spec\'s `default`, else the value in'
             ' `defaults/main.yml`; %s where neither sets one.' % NONE]
    notes = []
    if same:
        notes.append('The entry point%s %s take%s the same options as `main`.' % (
            's' if len(same) > 1 else '', _names(same), '' if len(same) > 1 else 's'))
    if none:
        notes.append('The entry point%s %s take%s no options.' % (
            's' if len(none) > 1 else '', _names(none), '' if len(none) > 1 else 's'))
    if notes:
        lines[-1] += ' ' + ' '.join(notes)
    lines.append('')
    if main:
        lines.extend(table(main, defaults))
    else:
        lines.append('The entry point `main` takes no options.')
    for entry in own:
        spec = specs[entry] or {}
        options = spec.get('options') or {}
        mine = {name: opt for name, opt in options.items() if main.get(name) != opt}
        shared = [name for name in options if name not in mine]
        lines.extend(['', '### Entry point `%s`' % entry, ''])
        summary = convert_markup(str(spec.get('short_description') or '')).rstrip('.')
        intro = '`tasks_from: %s`%s. ' % (entry, (': ' + summary) if summary else '')
        if shared and len(shared) == len(main):
            intro += 'Takes every option of `main`, and:'
        elif shared:
            intro += 'Takes %s as `main` does, and:' % ', '.join(code(name) for name in shared)
        else:
            intro += 'Takes only:'
        lines.extend([intro, ''])
        lines.extend(table(mine, defaults))
    lines.append(END)
    return '\n'.join(lines) + '\n'


def _names(entries):
    return ', '.join(code(entry) for entry in entries)


def updated(readme, section, role):
    """The README's text with its section replaced (or appended), and whether it had the markers."""
    if readme is None:
        return '# inferops.gpu.%s\n\n%s' % (role, section), False
    start = readme.find(BEGIN)
    end = readme.find(END, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return readme.rstrip('\n') + '\n\n' + section, False
    tail = readme[end + len(END):]
    if tail.startswith('\n'):
        tail = tail[1:]
    return readme[:start] + section + tail, True


def roles(roles_dir):
    """(name, directory) of every role with an argument spec, by name."""
    found = []
    for name in sorted(os.listdir(roles_dir)):
        path = os.path.join(roles_dir, name)
        if os.path.isfile(os.path.join(path, 'meta', 'argument_specs.yml')):
            found.append((name, path))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument('--write', action='store_true', help='rewrite the generated section of every role README')
    mode.add_argument('--check', action='store_true', help='exit 1 naming each role whose README is not what its spec generates')
    parser.add_argument('--roles-dir', default=os.path.join(ROOT, 'roles'), help='default: the collection\'s roles/')
    args = parser.parse_args(argv)
    stale = []
    for name, path in roles(args.roles_dir):
        readme_path = os.path.join(path, 'README.md')
        readme = None
        if os.path.isfile(readme_path):
            with open(readme_path, encoding='utf-8') as handle:
                readme = handle.read()
        text, _had = updated(readme, render(path), name)
        if text == readme:
            continue
        if args.write:
            with open(readme_path, 'w', encoding='utf-8') as handle:
                handle.write(text)
            print('role_readme: wrote %s' % os.path.relpath(readme_path, os.path.dirname(args.roles_dir)))
        else:
            stale.append(name)
    for name in stale:
        sys.stderr.write('role_readme: roles/%s/README.md is not what roles/%s/meta/argument_specs.yml generates\n' % (name, name))
    if stale:
        sys.stderr.write('role_readme: run `python tools/role_readme.py --write` and commit the READMEs\n')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
