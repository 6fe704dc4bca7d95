"""Bug: positions counted from 1 (``positions + 1``), e.g. copied from a 1-based position-id
scheme such as fairseq's ``make_positions`` (padding_idx + 1).

Adapters: apply, cache.
Expected diagnosis: ``position-offset`` ("positions shifted by +1"); the black-box "position 0 is
the identity" check fails as well.
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "position-offset"
PROTOCOL = "rope.apply"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def cache(positions, spec):
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=positions.device).float() / r))
    freqs = (positions[..., None] + 1).float() * inv_freq  # BUG: 1-based positions
    return freqs.cos(), freqs.sin()


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half layout only")
    if spec.scaling:
        raise Unsupported("no position scaling")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = (positions[..., None] + 1).float() * inv_freq  # BUG: 1-based positions
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
