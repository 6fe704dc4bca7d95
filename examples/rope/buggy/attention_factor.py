"""Bug: cos and sin are multiplied by a YaRN attention factor (0.1 ln 8 + 1 = 1.2079) although
the case has no scaling, so every rotated feature is 1.2079 times too large.

Adapters: apply, cache, frequencies.
Expected diagnosis: ``attention-factor`` ("output scaled by 1.208"); the black-box
norm-per-pair check fails as well.
"""

import math

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "attention-factor"
PROTOCOL = "rope.apply"

ATTENTION_FACTOR = 0.1 * math.log(8.0) + 1.0  # BUG: applied unconditionally


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def frequencies(spec, seq_len):
    r = spec.rotary_dim
    return 1.0 / (spec.base ** (torch.arange(0, r, 2).float() / r)), ATTENTION_FACTOR


def cache(positions, spec):
    inv_freq, factor = frequencies(spec, spec.seq_len)
    freqs = positions[..., None].float() * inv_freq.to(positions.device)
    return freqs.cos() * factor, freqs.sin() * factor


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half layout only")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos = (emb.cos() * ATTENTION_FACTOR).to(x.dtype)
    sin = (emb.sin() * ATTENTION_FACTOR).to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
