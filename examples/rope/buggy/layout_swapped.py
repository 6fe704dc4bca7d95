"""Bug: rotate_half is hard-coded, so the pairs are (j, j + r/2) whatever ``spec.layout`` says.

Correct for half-layout cases; every interleaved case (a model whose weights expect pairs
(2i, 2i+1): GPT-J, a Meta checkpoint not permuted for HF) is wrong. vLLM shipped this for GPT-J
(NEOX pairing on a GPT-J model) and llama.cpp for Orion. The default run grades the interleaved
cases (a probe never skips them) and fails them: ``layout-swapped`` (closest mutant: the other
layout), with the probe's note that the implementation pairs (j, j + r/2) whatever spec.layout says.
"""

import torch


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "layout-swapped"
PROTOCOL = "rope.apply"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply(x, positions, spec):
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    # BUG: spec.layout is never consulted.
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
