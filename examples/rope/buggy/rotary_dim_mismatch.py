"""Bug: with partial rotary, the frequency exponent divides by head_dim instead of rotary_dim.

theta_i = base ** (-2i / head_dim) for the r/2 rotated pairs, so a GPT-NeoX head with
rotary_pct = 0.25 gets frequencies that stop at base ** (-(r-2)/d) instead of reaching ~1/base.
Correct when rotary_dim == head_dim. Adapters: apply, frequencies.
Expected diagnosis: ``rotary-dim-mismatch``.
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "rotary-dim-mismatch"
PROTOCOL = "rope.apply"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def frequencies(spec, seq_len):
    r, d = spec.rotary_dim, spec.head_dim
    return 1.0 / (spec.base ** (torch.arange(0, r, 2).float() / d)), 1.0  # BUG: / r


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half layout only")
    r = spec.rotary_dim
    inv_freq = frequencies(spec, spec.seq_len)[0].to(x.device)
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
