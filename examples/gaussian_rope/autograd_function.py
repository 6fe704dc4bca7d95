"""Gaussian-kernel RoPE with a hand-written backward, in the input's dtype (training kernels).

f(x, m) = K(m) R_m x (seed document 002's formula), K(m) = a1 exp(-m^2 / (2 s1^2)) + a2 exp(-m^2 /
(2 s2^2)). The angles and K are computed in float32 from each token's position, as HF computes
RoPE's (K in float64 for float64 inputs: it underflows float32 long before float64), and cast to
x's dtype; the rotation runs in x's dtype. f is linear in x, so the backward
is the transpose: K(m) R_{-m} g, the same table with sin negated, and K(m) g on the tail.

Adapters: ``apply`` (gaussian_rope.apply, custom Function) and ``score`` (gaussian_rope.score:
K(n - m) <R_m q, R_n k> through plain autograd, in q's dtype).
"""

import torch


def kernel(positions, k, dtype=torch.float32):
    """K(m) in float32, or in float64 for float64 inputs (float32 flushes K to 0 past m = 50)."""
    m = positions.to(torch.promote_types(torch.float32, dtype))
    return k["a1"] * torch.exp(-m * m / (2 * k["s1"] ** 2)) + k["a2"] * torch.exp(-m * m / (2 * k["s2"] ** 2))


def tables(positions, spec, dtype):
    """(cos, sin) [b, s, 1, r] expanded for the spec's pair layout, in ``dtype``."""
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.int64, device=positions.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1) if spec.layout == "half" else torch.repeat_interleave(freqs, 2, dim=-1)
    return emb.cos()[:, :, None, :].to(dtype), emb.sin()[:, :, None, :].to(dtype)


def rotate(x, layout):
    """The pair's quarter turn: (-b, a) for each pair (a, b)."""
    if layout == "half":
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def turn(x, cos, sin, amp, r, layout):
    """amp * (R x on the first r dims, x on the rest)."""
    head = x[..., :r]
    return torch.cat((head * cos + rotate(head, layout) * sin, x[..., r:]), dim=-1) * amp


class GaussianRotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, amp, rotary_dim, layout):
        ctx.save_for_backward(cos, sin, amp)
        ctx.rotary_dim, ctx.layout = rotary_dim, layout
        return turn(x, cos, sin, amp, rotary_dim, layout)

    @staticmethod
    def backward(ctx, grad):
        cos, sin, amp = ctx.saved_tensors
        return turn(grad, cos, -sin, amp, ctx.rotary_dim, ctx.layout), None, None, None, None, None


def apply(x, positions, spec):
    cos, sin = tables(positions, spec, x.dtype)
    amp = kernel(positions, spec.kernel, x.dtype)[:, :, None, None].to(x.dtype)
    return GaussianRotary.apply(x, cos, sin, amp, spec.rotary_dim, spec.layout)


def score(q, k, q_positions, k_positions, spec):
    """K(n - m) <R_m q, R_n k> [batch, heads, sq, sk], autograd through plain operations."""
    r = spec.rotary_dim
    cq, sq = tables(q_positions, spec, q.dtype)
    ck, sk = tables(k_positions, spec, k.dtype)
    one = torch.ones((), dtype=q.dtype, device=q.device)
    qr, kr = turn(q, cq, sq, one, r, spec.layout), turn(k, ck, sk, one, r, spec.layout)
    distance = k_positions[:, None, :] - q_positions[:, :, None]
    return kernel(distance, spec.kernel, q.dtype)[:, None].to(q.dtype) * torch.einsum("bihd,bjhd->bhij", qr, kr)
