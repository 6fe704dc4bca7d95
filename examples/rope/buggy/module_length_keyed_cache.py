"""Bug: a rotary module that caches its cos/sin tables keyed on the number of tokens alone. The
same length at another offset (a decode chunk continuing a prompt) gets the first offset's tables.

Adapter: module (rope.module), cache form (``posref_output = "cos_sin"``, tables in pair order).
Unscaled cases only. Expected diagnosis: ``stale-state`` naming the step whose tables came back.
"""

import torch

from conformance import Unsupported

CODE = "stale-state"
PROTOCOL = "rope.module"


class CachedRotary(torch.nn.Module):
    posref_output = "cos_sin"

    def __init__(self, dim, base):
        super().__init__()
        self.inv_freq_values = [base ** (-2.0 * i / dim) for i in range(dim // 2)]
        self.cache = {}

    def forward(self, x, positions):
        key = positions.shape[-1]  # the bug: the offset is not part of the key
        if key not in self.cache:
            inv_freq = torch.tensor(self.inv_freq_values, dtype=torch.float32)
            angles = positions[..., None].float() * inv_freq
            self.cache[key] = (angles.cos(), angles.sin())
        return self.cache[key]


def module(spec):
    if spec.scaling is not None:
        raise Unsupported("unscaled RoPE only")
    return CachedRotary(spec.rotary_dim, spec.base)
