"""DeepSeek-V2/V3 multi-head latent attention's positional part in plain PyTorch, as a user writes it
after DeepSeek's modeling_deepseek.py: YaRN frequencies and the cos / sin factor
mscale(s, mscale) / mscale(s, mscale_all_dim) in float32, the rope features turned in their pair
layout, one rope key per token broadcast to every head, logits scaled by
(d_nope + d_rope)^-1/2 * mscale(s, mscale_all_dim)^2, causal softmax in float32.

Adapter: ``mla`` (attention.mla). The pieces (yarn_tables, rotate, softmax_scale, attend) are
reused by the buggy examples in buggy/mla_*.py.
"""

import math

import torch


def get_mscale(factor, m=1.0):
    return 0.1 * m * math.log(factor) + 1.0 if factor > 1 else 1.0


def yarn_tables(spec, positions):
    """(cos, sin) [b, s, d_rope/2] in float32 with YaRN's interpolated frequencies and its factor."""
    r, base = spec.d_rope, spec.base
    inv = 1.0 / base ** (torch.arange(0, r, 2, dtype=torch.float32, device=positions.device) / r)
    factor = 1.0
    sc = spec.scaling or {}
    if (sc.get("rope_type") or sc.get("type")) == "yarn":
        s, big_l = float(sc["factor"]), float(sc["original_max_position_embeddings"])

        def dim(n):
            return r * math.log(big_l / (n * 2 * math.pi)) / (2 * math.log(base))

        low = max(math.floor(dim(sc.get("beta_fast", 32))), 0)
        high = min(math.ceil(dim(sc.get("beta_slow", 1))), r - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(r // 2, dtype=torch.float32, device=positions.device) - low) / (high - low)).clamp(0, 1)
        inv = inv / s * ramp + inv * (1 - ramp)
        ms, all_dim = sc.get("mscale"), sc.get("mscale_all_dim")
        factor = get_mscale(s, ms) / get_mscale(s, all_dim) if ms and all_dim else get_mscale(s)
    angles = positions.to(torch.float32)[..., None] * inv
    return angles.cos() * factor, angles.sin() * factor


def rotate(x, cos, sin, layout):
    """x [b, s, heads, r] turned pair by pair: (2j, 2j+1) interleaved or (j, j + r/2) half."""
    cos, sin = cos[:, :, None].to(torch.float32), sin[:, :, None].to(torch.float32)
    xf = x.to(torch.float32)
    if layout == "interleaved":
        a, b = xf[..., 0::2], xf[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2).to(x.dtype)
    half = x.shape[-1] // 2
    a, b = xf[..., :half], xf[..., half:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1).to(x.dtype)


def softmax_scale(spec):
    """(d_nope + d_rope)^-1/2 * m^2, m = mscale(factor, mscale_all_dim) (DeepSeek, HF yarn_apply_mscale)."""
    scale = spec.qk_head_dim ** -0.5
    sc = spec.scaling or {}
    if (sc.get("rope_type") or sc.get("type")) not in (None, "default") and sc.get("mscale_all_dim"):
        m = get_mscale(float(sc["factor"]), sc["mscale_all_dim"])
        scale = scale * m * m
    return scale


def attend(q, k, v, scale, causal):
    """q, k [b, s, h, d_qk], v [b, s, h, d_v] -> [b, s, h, d_v]: eager attention, softmax in float32."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    logits = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        s = q.shape[2]
        hide = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        logits = logits.masked_fill(hide, float("-inf"))
    p = torch.softmax(logits, dim=-1, dtype=torch.float32).to(v.dtype)
    return torch.matmul(p, v).transpose(1, 2)


def mla(q_nope, q_pe, k_nope, k_pe, v, positions, spec, scale=None, tables=None, layout=None):
    cos, sin = (tables or yarn_tables)(spec, positions)
    lay = layout or spec.layout
    q_rot, k_rot = rotate(q_pe, cos, sin, lay), rotate(k_pe, cos, sin, lay)
    q = torch.cat((q_nope, q_rot), dim=-1)
    k = torch.cat((k_nope, k_rot.expand(-1, -1, q_nope.shape[2], -1)), dim=-1)  # the shared rope key
    return attend(q, k, v, softmax_scale(spec) if scale is None else scale, spec.causal)
