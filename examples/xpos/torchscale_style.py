"""xPos as torchscale computes it (XPOS in xpos_relative_position.py), written for the protocol:
float32 angles on interleaved pairs (duplicate_interleave, rotate_every_two), zeta_i = (2i + 0.4 d)
/ (1.4 d), the query scaled by zeta^((m - c)/B) and the key by its inverse. The exponent is
centred on the middle of the positions, as torchscale centres it on the middle of its sequence,
so large positions do not overflow; the centring cancels in q . k.

Adapter: ``apply`` (xpos.apply). Also follows spec.layout "half" (rotate_half pairs).
"""

import torch


def rotate_every_two(x):
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def expand(t, layout):
    """[..., r/2] per pair -> [..., r] per feature for the layout."""
    return torch.repeat_interleave(t, 2, dim=-1) if layout == "interleaved" else torch.cat((t, t), dim=-1)


def scaled_rotation(x, positions, spec, sign, centre, gamma=None, scale_base=None):
    r = spec.rotary_dim
    gamma = spec.gamma if gamma is None else gamma
    scale_base = spec.scale_base if scale_base is None else scale_base
    half = torch.arange(0, r, 2, dtype=torch.float32)
    inv_freq = 1.0 / (spec.base ** (half / r))
    zeta = (half + gamma * r) / ((1 + gamma) * r)
    m = positions[..., None].float()
    angles = m * inv_freq
    scale = zeta ** (sign * (m - centre) / scale_base)
    cos = expand(angles.cos() * scale, spec.layout)[:, :, None, :]
    sin = expand(angles.sin() * scale, spec.layout)[:, :, None, :]
    rotate = rotate_every_two if spec.layout == "interleaved" else rotate_half
    x_rot = x[..., :r].float()
    return torch.cat((x_rot * cos + rotate(x_rot) * sin, x[..., r:].float()), dim=-1).to(x.dtype)


def centre_of(positions):
    return float((int(positions.max()) + int(positions.min()) + 1) // 2)


def apply(q, k, positions, spec):
    c = centre_of(positions)
    return scaled_rotation(q, positions, spec, 1, c), scaled_rotation(k, positions, spec, -1, c)
