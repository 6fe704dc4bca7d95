"""Bug: a sinusoidal table added in the NoPE layer (x + PE[position]), as a model port that
"falls back" to absolute positions where RoPE is skipped would do.

Adapter: apply (nope.apply). Expected diagnosis: ``nope-position-added``.
"""

import torch

CODE = "nope-position-added"
PROTOCOL = "nope.apply"


def apply(x, positions, spec):
    i = torch.arange(0, spec.head_dim, 2, dtype=torch.float64)
    angles = positions[..., None].double() / 10000 ** (i / spec.head_dim)
    pe = torch.stack([angles.sin(), angles.cos()], -1).flatten(-2)
    return x + pe[:, :, None].to(x.dtype)  # BUG
