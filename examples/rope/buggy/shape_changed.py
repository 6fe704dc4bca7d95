"""Bug: returns [batch, heads, seq, head_dim] (the attention layout it uses internally) instead
of the input's [batch, seq, heads, head_dim].

Expected diagnosis: ``shape-changed``, from the black-box "shape preserved" check and the
runner's output validation (when seq == heads the shape happens to match and the values are
wrong instead).
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "shape-changed"
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
    emb = torch.cat((freqs, freqs), dim=-1)[:, None, :, :]  # [batch, 1, seq, r]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    xt = x.transpose(1, 2)  # [batch, heads, seq, head_dim]
    x_rot = xt[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, xt[..., r:]), dim=-1)  # BUG
