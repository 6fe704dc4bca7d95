"""Bug: inv_freq = base ** (-i / r) over i = 0..r/2-1 instead of base ** (-2i / r).

(``torch.arange(r // 2) / r`` where ``torch.arange(0, r, 2) / r`` was meant.) The frequencies
decay half as fast: the lowest one is base ** -0.5 instead of about 1 / base.
Adapters: apply, cache, frequencies.
Expected diagnosis: ``frequency-exponent`` ("inv_freq uses base**(-i/d) instead of
base**(-2i/d)").
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "frequency-exponent"
PROTOCOL = "rope.apply"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def frequencies(spec, seq_len):
    r = spec.rotary_dim
    return 1.0 / (spec.base ** (torch.arange(r // 2).float() / r)), 1.0  # BUG: arange(0, r, 2)


def cache(positions, spec):
    freqs = positions[..., None].float() * frequencies(spec, spec.seq_len)[0].to(positions.device)
    return freqs.cos(), freqs.sin()


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
