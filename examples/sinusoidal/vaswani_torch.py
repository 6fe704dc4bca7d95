"""Sinusoidal table as most PyTorch code writes it: float32 frequencies and angles.

Frequencies w_i = base**(-e_i) (e_i = 2i/d, or i/(d/2 - 1) for the tensor2tensor / fairseq rule),
angles ``positions.float() * w`` in float32, then sin and cos placed interleaved (the paper:
``pe[:, 0::2] = sin``, ``pe[:, 1::2] = cos``) or as [sin | cos] halves with a zero column for odd
d_model (fairseq). A 2-D table (MAE) concatenates the 1-D tables of the two coordinates.

Float32 angles drift by about position * 2**-24 radians: posref grades this "acceptable" at long
positions (within the standard budget, over the strict one).
"""

import torch


def _one_dim(pos, d, spec, angle_dtype):
    n = (d + 1) // 2 if spec.layout == "interleaved" else d // 2
    i = torch.arange(n, dtype=torch.float64)
    if spec.exponent == "2i/(d-2)":
        e = i / (d // 2 - 1)
    else:  # 2i/d; [sin | cos] halves of an odd d use their own n = floor(d/2): i / n
        e = i / n if spec.layout == "concatenated" else 2 * i / d
    w = (spec.base ** -e).to(angle_dtype)
    phi = (pos.to(angle_dtype)[:, None] * w[None, :]).float()
    out = torch.zeros(pos.shape[0], d, dtype=torch.float32)
    if spec.layout == "interleaved":
        out[:, 0::2] = torch.sin(phi)
        out[:, 1::2] = torch.cos(phi[:, : d // 2])
    else:
        out[:, :n] = torch.sin(phi)
        out[:, n:2 * n] = torch.cos(phi)
    return out


def table(positions, spec, angle_dtype=torch.float32):
    """angle_dtype: where the angles are computed (float32, as most code does)."""
    if spec.dims == 2:
        half = spec.d_model // 2
        return torch.cat([_one_dim(positions[:, 0], half, spec, angle_dtype),
                          _one_dim(positions[:, 1], half, spec, angle_dtype)], dim=-1)
    return _one_dim(positions, spec.d_model, spec, angle_dtype)
