"""Gaussian-kernel RoPE as a user would write it from seed document 002's formula:
f(x, m) = K(m) R_m x with K(m) = a1 exp(-m^2 / (2 s1^2)) + a2 exp(-m^2 / (2 s2^2)).

HF-style float32 angles (inv_freq = 1 / base ** (arange(0, r, 2) / r), positions * inv_freq),
cos/sin expanded for the case's layout (cat for rotate_half pairs, repeat_interleave for
(x_2i, x_2i+1) pairs), K(m) in float32 from each token's own position, applied to the whole vector.

Adapters: ``apply`` (gaussian_rope.apply), ``score`` (gaussian_rope.score: K(n - m) <R_m q, R_n k>).
"""

from dataclasses import replace

import torch


def kernel(positions, k):
    m = positions.float()
    return k["a1"] * torch.exp(-m * m / (2 * k["s1"] ** 2)) + k["a2"] * torch.exp(-m * m / (2 * k["s2"] ** 2))


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def apply(x, positions, spec):
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r))
    freqs = positions[..., None].float() * inv_freq  # [b, s, r/2]
    if spec.layout == "half":
        emb, rotate = torch.cat((freqs, freqs), dim=-1), rotate_half
    else:
        emb, rotate = torch.repeat_interleave(freqs, 2, dim=-1), rotate_every_two
    cos, sin = emb.cos()[:, :, None, :], emb.sin()[:, :, None, :]
    x_rot = x[..., :r].float()
    rotated = torch.cat((x_rot * cos + rotate(x_rot) * sin, x[..., r:].float()), dim=-1)
    return (kernel(positions, spec.kernel)[:, :, None, None] * rotated).to(x.dtype)


def score(q, k, q_positions, k_positions, spec):
    """The score form: K(n - m) <R_m q, R_n k>, [batch, heads, sq, sk] (gaussian_rope.score)."""
    no_kernel = {"a1": 1.0, "a2": 0.0, "s1": float("inf"), "s2": 1.0}  # rotation only
    plain_spec = replace(spec, kernel=no_kernel)
    qr, kr = apply(q.float(), q_positions, plain_spec), apply(k.float(), k_positions, plain_spec)
    dots = torch.einsum("bihd,bjhd->bhij", qr, kr)
    distance = k_positions[:, None, :] - q_positions[:, :, None]
    return (kernel(distance, spec.kernel)[:, None] * dots).to(q.dtype)
