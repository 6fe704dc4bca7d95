"""Bug: rotate_half (half layout) combined with GPT-J's repeat-interleaved cos/sin.

``repeat_interleave(freqs, 2)`` gives feature j the angle of pair j // 2, which is right for
pairs (2i, 2i+1) but not for pairs (j, j + r/2): the two elements of pair j get the angles of
pairs j // 2 and j // 2 + r/4. The map is no longer a rotation (pair norms change).
Expected diagnosis: ``pair-angle-mismatch`` ("the two elements of a pair are rotated by
different angles").
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "pair-angle-mismatch"
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
    emb = torch.repeat_interleave(freqs, 2, dim=-1)[:, :, None, :]  # BUG: should be cat(freqs, freqs)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
