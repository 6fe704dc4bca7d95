"""Bug: the base is hard-coded to 10000 instead of ``spec.base``.

Correct for Llama-2-like cases (base 1e4); wrong for Llama-3 (5e5) or Qwen (1e6) cases.
Adapters: apply, cache, frequencies. Expected diagnosis: ``wrong-base`` ("base 10000 used
instead of 500000").
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "wrong-base"
PROTOCOL = "rope.apply"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def frequencies(spec, seq_len):
    r = spec.rotary_dim
    base = 10000.0  # BUG: should be spec.base
    return 1.0 / (base ** (torch.arange(0, r, 2).float() / r)), 1.0


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
