"""A rotary module as users write one in plain torch, graded through rope.module.

``RotaryEmbedding(x, positions)`` returns x rotated (the default output form of rope.module). It
keeps no state between calls: the frequencies are recomputed in every forward from Python numbers
for the current length (largest position + 1), so dynamic NTK returns to the base frequencies
after a long prompt, LongRoPE picks its factors by the current length, no cos/sin cache can go
stale, and ``module.to(torch.bfloat16)`` has no frequency buffer to round. Angles are float32
products (the usual practice: within the standard budget).

Scalings: none, dynamic NTK and LongRoPE (HF ``rope_parameters`` form); other types raise
Unsupported. Both pair layouts, partial rotary.
"""

import math

import torch

from conformance import Unsupported


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, head_dim, rotary_dim=None, base=10000.0, layout="half", scaling=None):
        super().__init__()
        self.head_dim = head_dim
        self.rotary_dim = rotary_dim or head_dim
        self.base = float(base)
        self.layout = layout
        self.scaling = dict(scaling or {})
        self.rope_type = self.scaling.get("rope_type") or self.scaling.get("type") or "default"
        if self.rope_type not in ("default", "dynamic", "longrope"):
            raise Unsupported(f"rope_type {self.rope_type!r} is not implemented here")

    def frequencies(self, seq_len):
        """(inv_freq float64 [r/2], attention factor) for the current length."""
        r, base, s = self.rotary_dim, self.base, self.scaling
        exponents = torch.arange(0, r, 2, dtype=torch.float64) / r
        if self.rope_type == "dynamic":
            original = s["original_max_position_embeddings"]
            length = max(seq_len, original)
            base = base * (s["factor"] * length / original - (s["factor"] - 1)) ** (r / (r - 2))
        inv_freq = 1.0 / base**exponents
        factor = 1.0
        if self.rope_type == "longrope":
            original = s["original_max_position_embeddings"]
            ext = s["long_factor"] if seq_len > original else s["short_factor"]
            inv_freq = inv_freq / torch.tensor(ext, dtype=torch.float64)
            scale = s.get("factor", s.get("max_position_embeddings", original) / original)
            factor = s.get("attention_factor", math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1 else 1.0)
        return inv_freq, factor

    def forward(self, x, positions):
        seq_len = int(positions.max()) + 1
        inv_freq, factor = self.frequencies(seq_len)
        angles = positions[..., None].float() * inv_freq.to(device=x.device, dtype=torch.float32)  # [b, s, r/2]
        cos, sin = angles.cos() * factor, angles.sin() * factor
        r = self.rotary_dim
        xr, tail = x[..., :r].float(), x[..., r:]
        cos, sin = cos[:, :, None, :], sin[:, :, None, :]
        if self.layout == "half":
            a, b = xr[..., : r // 2], xr[..., r // 2:]
            out = torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
        else:
            a, b = xr[..., 0::2], xr[..., 1::2]
            out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
        return torch.cat((out.to(x.dtype), tail), dim=-1)


def module(spec):
    """rope.module adapter: the factory."""
    return RotaryEmbedding(spec.head_dim, spec.rotary_dim, spec.base, spec.layout, spec.scaling)
