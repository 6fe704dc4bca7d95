"""Bug: the angles m * theta_i are computed in bfloat16 (positions and inv_freq cast to bf16
first, as happens when the rotary buffers follow ``model.to(torch.bfloat16)`` and autocast is not
disabled for the angle product).

bfloat16 keeps 8 significant bits, so the angle error grows with the position: position 4095
itself rounds to 4096. Adapters: apply, cache.
Expected diagnosis: ``angle-precision`` ("angles computed in bfloat16:
error grows with position").
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "angle-precision"
PROTOCOL = "rope.apply"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def cache(positions, spec):
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=positions.device).float() / r))
    freqs = positions[..., None].to(torch.bfloat16) * inv_freq.to(torch.bfloat16)  # BUG
    return freqs.float().cos(), freqs.float().sin()


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half layout only")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    # BUG: the product is taken in bfloat16.
    freqs = positions[..., None].to(torch.bfloat16) * inv_freq.to(torch.bfloat16)
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
