"""Bug: written in the style of seed document 002's own code. Its cos/sin tables are built for
rotate_half pairs (``emb = cat(freqs, freqs)``) while its ``rotate_half`` pairs neighbours
(``stack((-x[1::2], x[::2]))``, the interleaved layout), so the two elements of a pair turn by
different angles; and its kernel is evaluated at ``arange(seq_len)``, the token index, not the
position.

Adapter: apply (gaussian_rope.apply). Expected diagnosis: ``pair-angle-mismatch`` (on the prefill
cases, where the token index and the position agree).
"""

import torch

# What posref must report for this file, graded as <file>:apply on the gaussian_rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "pair-angle-mismatch"
PROTOCOL = "gaussian_rope.apply"


def gaussian_kernel(r, alpha1, alpha2, sigma1, sigma2):
    return alpha1 * torch.exp(-r**2 / (2 * sigma1**2)) + alpha2 * torch.exp(-r**2 / (2 * sigma2**2))


def rotate_half(x):
    x1, x2 = x[..., ::2], x[..., 1::2]  # BUG: neighbours, but the tables below are for halves
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply(x, positions, spec):
    dim = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, dim, 2).float() / dim))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, :, None, :], emb.sin()[:, :, None, :]
    r = torch.arange(positions.shape[1]).float()  # BUG: the token index, as the document computes it
    k = spec.kernel
    K_r = gaussian_kernel(r, k["a1"], k["a2"], k["s1"], k["s2"])[None, :, None, None]
    return (K_r * ((x.float() * cos) + (rotate_half(x.float()) * sin))).to(x.dtype)
