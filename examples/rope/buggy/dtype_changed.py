"""Bug: cos and sin stay float32 and are never cast to x.dtype, so a bfloat16 or float16 input
comes back as float32 (type promotion). Correct in float32.

Expected diagnosis: ``dtype-changed`` ("returned float32 for bfloat16 input"), from the
black-box "dtype preserved" check and the runner's output validation.
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "dtype-changed"
PROTOCOL = "rope.apply"
OPTIONS = {"dtypes": ("bfloat16",)}


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half layout only")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos(), emb.sin()  # BUG: missing .to(x.dtype)
    x_rot = x[..., :r]
    out = x_rot * cos + rotate_half(x_rot) * sin
    return torch.cat((out, x[..., r:].to(out.dtype)), dim=-1)
