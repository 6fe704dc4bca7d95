"""Bug: YaRN's ramp reversed and its attention factor left at 1. The high-frequency pairs (short
wavelengths, which YaRN keeps) are interpolated by 1/factor and the low-frequency pairs (which it
interpolates) are kept; cos and sin are not multiplied by the attention factor. litgpt's YaRN did
this: at base 150000 and factor 32 (gpt-oss), pair 0 turns by 1.0 per position in transformers and
by 0.03125 in litgpt.

YaRN cases only (Unsupported otherwise), both layouts, partial rotary.
Expected diagnosis: ``scaling-mismatch`` ("YaRN ramp reversed: ...").
"""

import math

import torch

from conformance import Unsupported

CODE = "scaling-mismatch"
PROTOCOL = "rope.apply"


def _correction_dim(n_rot, r, base, original):
    return r * math.log(original / (n_rot * 2 * math.pi)) / (2 * math.log(base))


def inv_freq(spec):
    sc = dict(spec.scaling or {})
    if sc.get("rope_type", sc.get("type")) != "yarn":
        raise Unsupported("YaRN cases only")
    r, base, factor = spec.rotary_dim, spec.base, sc["factor"]
    original = sc["original_max_position_embeddings"]
    low = _correction_dim(sc.get("beta_fast", 32), r, base, original)
    high = _correction_dim(sc.get("beta_slow", 1), r, base, original)
    if sc.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, r - 1)
    if low == high:
        high += 0.001
    extrapolated = 1.0 / (base ** (torch.arange(0, r, 2, dtype=torch.float64) / r))
    interpolated = extrapolated / factor
    ramp = torch.clamp((torch.arange(r // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
    # BUG: the ramp weights the extrapolated frequencies (it must weight the interpolated ones).
    return (extrapolated * ramp + interpolated * (1 - ramp)).float()


def apply(x, positions, spec):
    if getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("x [b, s, h, d] only")
    r = spec.rotary_dim
    freqs = positions[..., None].float() * inv_freq(spec).to(x.device)  # BUG: no attention factor
    if spec.layout == "half":
        emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
        x1, x2 = x[..., : r // 2], x[..., r // 2: r]
        rot = torch.cat((-x2, x1), dim=-1)
    else:
        emb = torch.repeat_interleave(freqs, 2, dim=-1)[:, :, None, :]
        rot = torch.stack((-x[..., 1:r:2], x[..., 0:r:2]), dim=-1).flatten(-2)
    out = x[..., :r] * emb.cos().to(x.dtype) + rot * emb.sin().to(x.dtype)
    return torch.cat((out, x[..., r:]), dim=-1)
