"""Bug: a fused RoPE + float8 kernel that always pairs (j, j + r/2) (NEOX style), whatever
``spec.layout`` says; interleaved (GPT-J style) models get the wrong pairs, which the float8 rounding
does not hide. Graded on the dequantised values, the diagnosis is rope.apply's: ``layout-swapped``.
"""

import torch

from conformance import Unsupported

CODE = "layout-swapped"
PROTOCOL = "rope.apply_qk_fp8"


def _rotate(x, positions, spec):
    if spec.scaling is not None:
        raise Unsupported("no scaling")
    r = spec.rotary_dim
    x = x.float()
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2).float() / r))
    freqs = positions[..., None].float() * inv_freq
    cos, sin = freqs.cos()[:, :, None, :], freqs.sin()[:, :, None, :]
    x1, x2 = x[..., : r // 2], x[..., r // 2 : r]  # BUG: half pairs for every spec.layout
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., r:]), dim=-1)


def _quantize(x, scale):
    return (x / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)


def apply_qk_fp8(q, k, positions, spec):
    return _quantize(_rotate(q, positions, spec), spec.q_scale), _quantize(_rotate(k, positions, spec), spec.k_scale)
