"""Bug: linear position interpolation with factor 2 (inv_freq / 2) is applied although the case
has ``scaling`` None (a leftover ``rope_scaling={"type": "linear", "factor": 2.0}``).

Adapters: apply, frequencies. Expected diagnosis: ``scaling-mismatch`` ("frequencies divided by 2: linear position
interpolation with factor 2 applied, but the case has no scaling").
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "scaling-mismatch"
PROTOCOL = "rope.apply"

LINEAR_FACTOR = 2.0  # BUG: should come from spec.scaling (None here)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def frequencies(spec, seq_len):
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2).float() / r))
    return inv_freq / LINEAR_FACTOR, 1.0


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
