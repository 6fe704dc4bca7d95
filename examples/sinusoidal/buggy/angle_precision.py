"""Bug: the angles computed in bfloat16 (positions and frequencies cast to the model dtype first).

Code that builds the table in the model's dtype, ``positions.to(bf16) * inv_freq.to(bf16)``, keeps
8 significant bits of each angle: already position 300 is off by a whole radian in the fastest
frequency. Expected diagnosis: ``angle-precision`` ("angles p * w_i computed in bfloat16").
"""

import torch

CODE = "angle-precision"
PROTOCOL = "sinusoidal.table"


def _one_dim(pos, d, spec):
    n = (d + 1) // 2 if spec.layout == "interleaved" else d // 2
    i = torch.arange(n, dtype=torch.float64)
    e = 2 * i / d if spec.exponent == "2i/d" else i / (d // 2 - 1)
    w = (spec.base ** -e).to(torch.bfloat16)
    phi = (pos.to(torch.bfloat16)[:, None] * w[None, :]).float()  # BUG: bfloat16 angles
    out = torch.zeros(pos.shape[0], d)
    if spec.layout == "interleaved":
        out[:, 0::2] = torch.sin(phi)
        out[:, 1::2] = torch.cos(phi[:, : d // 2])
    else:
        out[:, :n] = torch.sin(phi)
        out[:, n:2 * n] = torch.cos(phi)
    return out


def table(positions, spec):
    if spec.dims == 2:
        half = spec.d_model // 2
        return torch.cat([_one_dim(positions[:, 0], half, spec), _one_dim(positions[:, 1], half, spec)], dim=-1)
    return _one_dim(positions, spec.d_model, spec)
