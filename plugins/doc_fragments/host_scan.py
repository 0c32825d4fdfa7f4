# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # The options of the one pass over a host for what was set by hand (module_utils/runtime_env/host_scan.py),
    # shared by runtime_env_host_edits (which reports it) and runtime_env_adopt (which takes it over).
    DOCUMENTATION = r'''
options:
  pythons:
    description: The interpreters whose start-up files are read (the release's, the system's); missing ones are skipped.
    type: list
    elements: path
    default: [/usr/bin/python3]
  homes:
    description: Home directories whose Python user sites are read (root's, the service user's).
    type: list
    elements: path
    default: [/root]
  managed_names:
    description: The variables the runtime environment's spec sets (C(PATH) is always one).
    type: list
    elements: str
    default: []
  managed_files:
    description: The collection's own files, left out (its start-up hook is found by name in every site directory).
    type: list
    elements: path
    default: []
  owned_roots:
    description: The directories the collection's libraries live under (the toolkit, the release).
    type: list
    elements: path
    default: []
  sonames:
    description: The libraries that must resolve from O(owned_roots) when an entry of C(ld.so.conf.d) provides them.
    type: list
    elements: str
    default: []
  command_timeout:
    description: Seconds each command (an interpreter asked for its directories, C(ldconfig)) may take.
    type: int
    default: 60
'''
