# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runtime_env spec's per-architecture variables, chosen by the GPUs' compute capability.

Some settings are right for one GPU generation only: on SM120 (RTX PRO 6000 Blackwell, compute
capability 12.0) FlashInfer's JIT arch list and DeepGEMM's JIT (which has no SM120 kernels in the
releases the profiles pin). They are chosen by the capability gpu_info reports, never by a product
name: a host whose GPUs all report one capability gets that capability's profile; a host mixing
capabilities gets none, since each profile would be wrong for the other GPUs.
"""

from __future__ import annotations

import re

CAPABILITY = re.compile(r'^[0-9]+\.[0-9]+\Z')
# runtime_env_compute_capability: empty reads gpu_info; none sets no per-architecture variable.
READ, NONE = '', 'none'


def host_capabilities(gpus):
    """The distinct compute capabilities of gpu_info's gpus list ("12.0"), sorted; unknown ones left out."""
    found = set()
    for gpu in gpus or []:
        value = gpu.get('compute_capability') if isinstance(gpu, dict) else None
        if isinstance(value, str) and CAPABILITY.match(value):
            found.add(value)
    return sorted(found, key=lambda text: tuple(int(part) for part in text.split('.')))


def choose(setting, gpus, profiles):
    """(capability, variables, why): the profile of the host's one capability.

    setting: runtime_env_compute_capability ('' reads `gpus`, 'none', or 'X.Y'); profiles: the
    merged {capability: {VAR: value}}. Values come back as strings, as the spec holds them."""
    if setting == NONE:
        return NONE, {}, 'runtime_env_compute_capability is none'
    if setting:
        found = [setting]
    else:
        found = host_capabilities(gpus)
    if not found:
        return NONE, {}, 'gpu_info reports no compute capability'
    if len(found) > 1:
        return NONE, {}, 'the GPUs report several compute capabilities (%s): no per-architecture profile fits all' % (
            ', '.join(found))
    capability = found[0]
    profile = profiles.get(capability)
    if profile is None:
        return capability, {}, 'no per-architecture profile for compute capability %s' % capability
    return capability, dict((name, str(value)) for name, value in profile.items()), (
        'the profile of compute capability %s' % capability)
