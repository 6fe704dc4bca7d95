"""Bug: LongRoPE switching to the long factors one token early: ``seq_len >= original`` where the
long factors apply only once the length exceeds ``original_max_position_embeddings`` (HF's
``longrope_frequency_update``: ``seq_len > original_max_position_embeddings``).

Adapter: module (rope.module), apply form. LongRoPE cases only (others: Unsupported).
Expected diagnosis: ``longrope-switch`` at the decode step of length original.
"""

import math

import torch

from conformance import Unsupported

CODE = "longrope-switch"
PROTOCOL = "rope.module"


class LongRopeRotary(torch.nn.Module):
    def __init__(self, dim, base, params):
        super().__init__()
        self.dim, self.base, self.params = dim, base, params
        self.original = params["original_max_position_embeddings"]
        scale = params.get("factor", 1.0)
        self.attention = math.sqrt(1 + math.log(scale) / math.log(self.original)) if scale > 1 else 1.0

    def forward(self, x, positions):
        seq_len = int(positions.max()) + 1
        ext = self.params["long_factor"] if seq_len >= self.original else self.params["short_factor"]  # bug: >=
        exponents = torch.arange(0, self.dim, 2, dtype=torch.float64) / self.dim
        inv_freq = 1.0 / (torch.tensor(ext, dtype=torch.float64) * self.base**exponents)
        angles = positions[..., None].float() * inv_freq.float()
        cos = (angles.cos() * self.attention)[:, :, None, :]
        sin = (angles.sin() * self.attention)[:, :, None, :]
        half = self.dim // 2
        a, b = x[..., :half].float(), x[..., half:].float()
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1).to(x.dtype)


def module(spec):
    scaling = dict(spec.scaling or {})
    if scaling.get("rope_type") != "longrope" or spec.layout != "half" or spec.rotary_dim != spec.head_dim:
        raise Unsupported("LongRoPE, half layout, whole head only")
    return LongRopeRotary(spec.head_dim, spec.base, scaling)
