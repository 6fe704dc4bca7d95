"""Bug: a dynamic NTK rotary module that only ever grows its cached length (transformers before the
reset of ``dynamic_rope_update``): after a prompt longer than the original context it keeps the
scaled base, so a later short prompt turns by the long prompt's frequencies.

Adapter: module (rope.module), apply form. Dynamic NTK cases only (others: Unsupported).
Expected diagnosis: ``stale-state`` naming the long prompt's step.
"""

import torch

from conformance import Unsupported

# What posref must report for this file, graded as <file>:module on the rope.module catalog
# (tests/test_family_contract.py checks it).
CODE = "stale-state"
PROTOCOL = "rope.module"


class DynamicNTKRotary(torch.nn.Module):
    def __init__(self, dim, base, factor, original):
        super().__init__()
        self.dim, self.base, self.factor, self.original = dim, base, factor, original
        self.max_seq_len_cached = original
        self.inv_freq = self._inv_freq(original)

    def _inv_freq(self, seq_len):
        d = self.dim
        base = self.base * (self.factor * seq_len / self.original - (self.factor - 1)) ** (d / (d - 2))
        return 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)

    def forward(self, x, positions):
        seq_len = int(positions.max()) + 1
        if seq_len > self.max_seq_len_cached:  # grows, and never comes back
            self.max_seq_len_cached = seq_len
            self.inv_freq = self._inv_freq(seq_len)
        angles = positions[..., None].float() * self.inv_freq.float()
        cos, sin = angles.cos()[:, :, None, :], angles.sin()[:, :, None, :]
        half = self.dim // 2
        a, b = x[..., :half].float(), x[..., half:].float()
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1).to(x.dtype)


def module(spec):
    scaling = dict(spec.scaling or {})
    if scaling.get("rope_type") != "dynamic" or spec.layout != "half" or spec.rotary_dim != spec.head_dim:
        raise Unsupported("dynamic NTK, half layout, whole head only")
    return DynamicNTKRotary(spec.head_dim, spec.base, scaling["factor"],
                            scaling["original_max_position_embeddings"])
