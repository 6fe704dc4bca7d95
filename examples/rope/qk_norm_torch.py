"""rope.qk_norm in plain PyTorch: RMSNorm in float32 over a head or over the token's whole projection
(the weight applied in float32, one rounding to the dtype, as OLMo 2's norm does), then RoPE with
float32 tables over the first rotary_dim features in either pair layout (default frequencies;
scalings: Unsupported).

Adapter: ``qk_norm`` (rope.qk_norm).
"""

import torch

from conformance import Unsupported


def rms_norm(x, weight, spec):
    b, s, h, d = x.shape
    flat = x.float().reshape(b, s, 1, h * d) if spec.norm_scope == "full" else x.float()
    w = weight.float()
    y = flat * torch.rsqrt(flat.pow(2).mean(-1, keepdim=True) + spec.eps) * w
    return y.reshape(b, s, h, d).to(x.dtype)


def rope(x, positions, spec):
    if spec.scaling:
        raise Unsupported("default frequencies only")
    r = spec.rotary_dim
    inv = 1.0 / spec.base ** (torch.arange(0, r, 2, dtype=torch.float32, device=x.device) / r)
    ang = positions.float()[..., None, None] * inv  # [b, s, 1, r/2]
    cos, sin = ang.cos(), ang.sin()
    xf = x[..., :r].float()
    if spec.layout == "interleaved":
        a, b = xf[..., 0::2], xf[..., 1::2]
        rot = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    else:
        a, b = xf[..., : r // 2], xf[..., r // 2:]
        rot = torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return torch.cat((rot.to(x.dtype), x[..., r:]), dim=-1)


def qk_norm(q, k, positions, q_weight, k_weight, spec):
    return rope(rms_norm(q, q_weight, spec), positions, spec), rope(rms_norm(k, k_weight, spec), positions, spec)
