"""Bug: the rotated values multiplied by the per-tensor scale instead of divided by it.

Scales come in two conventions: the dequantisation scale s (stored = x / s, FlashInfer's and vLLM's
``k_scale``) and its reciprocal (stored = x * inv_s). Code that takes one for the other multiplies
by s. Expected diagnosis: ``fp8-scale-inverted``.
"""

import torch

from conformance import Unsupported

CODE = "fp8-scale-inverted"
PROTOCOL = "rope.apply_qk_fp8"


def _rotate(x, positions, spec):
    if spec.layout != "half" or spec.scaling is not None:
        raise Unsupported("half layout, no scaling")
    r = spec.rotary_dim
    x = x.float()
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2).float() / r))
    freqs = positions[..., None].float() * inv_freq
    cos, sin = freqs.cos()[:, :, None, :], freqs.sin()[:, :, None, :]
    x1, x2 = x[..., : r // 2], x[..., r // 2 : r]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., r:]), dim=-1)


def _quantize(x, scale):
    return (x * scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)  # BUG: x * scale, not x / scale


def apply_qk_fp8(q, k, positions, spec):
    return _quantize(_rotate(q, positions, spec), spec.q_scale), _quantize(_rotate(k, positions, spec), spec.k_scale)
