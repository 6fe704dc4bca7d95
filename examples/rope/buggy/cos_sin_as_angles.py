"""Bug: the cos and sin tables are fed where the angles are expected, so the rotation applied is
cos(cos(m theta)) / sin(cos(m theta)): every pair turns by cos(m theta_i) radians instead of
m theta_i, and position 0 (cos 0 = 1) turns by one radian instead of staying put.

Megatron-Core shipped this: a cached cos table passed as ``freqs`` to apply_rotary_pos_emb, which
takes the cosine and sine again. Half layout only (Unsupported otherwise); no scaling.
Expected diagnosis: ``cos-sin-as-angles``.
"""

import torch

from conformance import Unsupported

CODE = "cos-sin-as-angles"
PROTOCOL = "rope.apply"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply(x, positions, spec):
    if spec.layout != "half" or getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("half layout, x [b, s, h, d] only")
    if spec.scaling is not None:
        raise Unsupported("no RoPE scaling")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cached = emb.cos()  # the cos table a caller keeps ...
    angles = cached  # BUG: ... handed over as the angles
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
