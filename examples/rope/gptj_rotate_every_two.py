"""GPT-J / mesh-transformer-jax style RoPE: rotate_every_two, interleaved pairs (2i, 2i+1).

As in GPT-J's ``create_sinusoidal_positions`` / ``apply_rotary_pos_emb``: float32 angles
m * theta_i with theta_i = base ** (-2i / r), sin and cos repeat-interleaved twice so that both
elements of pair i see angle i, cast to x.dtype, then ``x * cos + rotate_every_two(x) * sin``
with rotate_every_two(x)[2i] = -x[2i+1], [2i+1] = x[2i]. GPT-J rotates ``rotary_dim`` (64) of
each 256-wide head; the tail passes through.
"""

import torch

from conformance import Unsupported


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply(x, positions, spec):
    if getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("x [batch, seq, heads, head_dim] only")
    if spec.layout != "interleaved":
        raise Unsupported("rotate_every_two pairs (2i, 2i+1): interleaved layout only")
    if spec.scaling is not None:
        raise Unsupported("GPT-J has no RoPE scaling")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    sinusoid = positions[..., None].float() * inv_freq  # [batch, seq, r/2]
    sin = torch.repeat_interleave(sinusoid.sin(), 2, dim=-1)[:, :, None, :].to(x.dtype)
    cos = torch.repeat_interleave(sinusoid.cos(), 2, dim=-1)[:, :, None, :].to(x.dtype)
    x_rot, x_pass = x[..., :r], x[..., r:]
    out = x_rot * cos + rotate_every_two(x_rot) * sin
    return torch.cat((out, x_pass), dim=-1)
