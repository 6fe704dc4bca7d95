"""Bug: the result depends on more than the inputs: a leftover dropout-like perturbation adds
random noise of relative size 1e-3 in float32 before the cast to x.dtype, fresh on every call.

Two calls with the same inputs return different tensors. Expected diagnosis:
``not-deterministic`` (black-box determinism check); the golden cases fail in float32 without a
mutant that explains them.
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "not-deterministic"
PROTOCOL = "rope.apply"


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
    x_rot = x[..., :r].float()
    out = x_rot * emb.cos() + rotate_half(x_rot) * emb.sin()
    out = out * (1.0 + 1e-3 * torch.randn_like(out))  # BUG: unseeded noise on every call
    return torch.cat((out.to(x.dtype), x[..., r:]), dim=-1)
