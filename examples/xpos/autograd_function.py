"""xPos with a hand-written backward, in the input's dtype (training kernels).

Forward as torchscale's XPOS (arXiv 2212.10554): float32 angles and scales zeta_i^(+-(m - c)/B),
zeta_i = (2i + gamma r) / ((1 + gamma) r), folded into the cos/sin tables and cast to q's dtype; the
query gets zeta^((m - c)/B), the key its inverse, the exponent centred on the middle of the
positions (the centring cancels in q . k). Each output is linear in its input, so the backward is
the transpose: the same scaled table with sin negated, s R_{-m} g_q and s^(-1) R_{-m} g_k.

Adapter: ``apply`` (xpos.apply), both pair layouts.
"""

import torch


def rotate(x, layout):
    """The pair's quarter turn: (-b, a) for each pair (a, b)."""
    if layout == "interleaved":
        return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def expand(t, layout):
    return torch.repeat_interleave(t, 2, dim=-1) if layout == "interleaved" else torch.cat((t, t), dim=-1)


def scaled_tables(positions, spec, sign, centre, dtype):
    """(s cos, s sin) [b, s, 1, r] in ``dtype``, s = zeta^(sign (m - c) / B)."""
    r = spec.rotary_dim
    half = torch.arange(0, r, 2, dtype=torch.float32, device=positions.device)
    inv_freq = 1.0 / (spec.base ** (half / r))
    zeta = (half + spec.gamma * r) / ((1 + spec.gamma) * r)
    m = positions[..., None].float()
    scale = zeta ** (sign * (m - centre) / spec.scale_base)
    angles = m * inv_freq
    cos = expand(angles.cos() * scale, spec.layout)[:, :, None, :]
    sin = expand(angles.sin() * scale, spec.layout)[:, :, None, :]
    return cos.to(dtype), sin.to(dtype)


def turn(x, cos, sin, r, layout):
    head = x[..., :r]
    return torch.cat((head * cos + rotate(head, layout) * sin, x[..., r:]), dim=-1)


class ScaledRotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, rotary_dim, layout):
        ctx.save_for_backward(cos, sin)
        ctx.rotary_dim, ctx.layout = rotary_dim, layout
        return turn(x, cos, sin, rotary_dim, layout)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        return turn(grad, cos, -sin, ctx.rotary_dim, ctx.layout), None, None, None, None


def centre_of(positions):
    return float((int(positions.max()) + int(positions.min()) + 1) // 2)


def apply(q, k, positions, spec):
    c = centre_of(positions)
    out = []
    for x, sign in ((q, 1), (k, -1)):
        cos, sin = scaled_tables(positions, spec, sign, c, x.dtype)
        out.append(ScaledRotary.apply(x, cos, sin, spec.rotary_dim, spec.layout))
    return tuple(out)
