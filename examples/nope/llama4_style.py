"""A NoPE layer as interleaved models write it: Llama 4 and SmolLM3 decide per layer whether the
rotary embedding is used, and a NoPE layer hands its queries and keys to attention unchanged.

Adapter: ``apply`` (nope.apply).
"""

import torch


class RotaryOrNope(torch.nn.Module):
    """Applies RoPE (rotate_half form) when ``use_rope``; passes x through otherwise."""

    def __init__(self, head_dim, use_rope, base=500000.0):
        super().__init__()
        self.use_rope = use_rope
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, positions):
        if not self.use_rope:
            return x
        angles = positions[..., None].float() * self.inv_freq
        cos = torch.cat([angles.cos(), angles.cos()], -1)[:, :, None].to(x.dtype)
        sin = torch.cat([angles.sin(), angles.sin()], -1)[:, :, None].to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], -1) * sin


def apply(x, positions, spec):
    return RotaryOrNope(spec.head_dim, use_rope=False)(x, positions)
