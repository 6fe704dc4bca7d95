"""Bug: rotate_half written as cat(x2, -x1), so every pair turns by -m * theta_i.

A sign slip that keeps norms and q.k shift invariance (the score becomes <q, R_{m-n} k>), so only
comparison with the reference exposes it. Adapters: apply, cache.
Expected diagnosis: ``rotation-reversed``.
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "rotation-reversed"
PROTOCOL = "rope.apply"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x2, -x1), dim=-1)  # BUG: should be cat(-x2, x1)


def cache(positions, spec):
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=positions.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    return freqs.cos(), -freqs.sin()  # the same slip, in the table: sin of -m * theta


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half layout only")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
