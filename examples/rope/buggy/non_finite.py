"""Bug: positions are cast to float16 before the angle product. float16 overflows to Inf past
65504, so sin and cos of the angle are NaN for positions >= 65520 (and positions below that are
rounded to 11 significant bits).

Expected diagnosis: ``non-finite`` for cases with positions past 2^16 (the runner's output
validation; the black-box checks see it too because their inputs hold position 70000). Cases at
smaller positions get ``angle-precision``.
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "non-finite"
PROTOCOL = "rope.apply"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half layout only")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    t = positions.to(torch.float16).float()  # BUG: Inf for positions >= 65520
    freqs = t[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
