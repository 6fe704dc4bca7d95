"""HF / GPT-NeoX style RoPE: float32 inv_freq and angles, cos/sin cast to x.dtype, rotate_half.

This is how ``transformers`` (LlamaRotaryEmbedding + apply_rotary_pos_emb) and GPT-NeoX compute
RoPE: theta_i = base ** (-2i / r) and the angles m * theta_i in float32, ``emb = cat(freqs,
freqs)``, cos and sin cast to the model dtype, then ``x * cos + rotate_half(x) * sin`` where
rotate_half(x) = cat(-x2, x1). Pairs are (j, j + r/2): the "half" layout. Partial rotary
(GPT-NeoX ``rotary_pct``): only the first ``spec.rotary_dim`` features turn, the tail passes
through. Scaling: none, "default", "linear" (position interpolation, inv_freq / factor) or
"llama3" (Llama 3.1's bands, as HF's ``_compute_llama3_parameters`` computes them in float32).

Adapters: ``apply`` (rope.apply), ``apply_qk`` (rope.apply_qk: q and k in one call, as HF's
apply_rotary_pos_emb), ``cache`` (rope.cache), ``frequencies`` (rope.frequencies).
"""

import math

import torch

from conformance import Unsupported


def frequencies(spec, seq_len):
    """(inv_freq float32 [r/2], attention_factor) as HF's rope init functions return them."""
    r = spec.rotary_dim
    exponent = torch.arange(0, r, 2, dtype=torch.int64).float() / r
    inv_freq = 1.0 / (spec.base ** exponent)
    scaling = dict(spec.scaling or {})
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type == "linear":
        inv_freq = inv_freq / scaling["factor"]
    elif rope_type == "llama3":
        inv_freq = _llama3(inv_freq, scaling)
    elif rope_type != "default":
        raise Unsupported(f"rope_type {rope_type!r} is not implemented by this example")
    return inv_freq, 1.0


def _llama3(inv_freq, scaling):
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) * ~(wavelen > old / low)
    return torch.where(medium, smoothed, scaled)


def _angles(positions, spec):
    inv_freq, attention_factor = frequencies(spec, spec.seq_len)
    inv_freq = inv_freq.to(positions.device)
    # float32 angles, as HF computes them with autocast disabled.
    return positions[..., None].float() * inv_freq, attention_factor


def cache(positions, spec):
    """(cos, sin) float32 [batch, seq, r/2] in pair order."""
    freqs, attention_factor = _angles(positions, spec)
    return freqs.cos() * attention_factor, freqs.sin() * attention_factor


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply(x, positions, spec):
    """Every tensor layout posref hands over (spec.tensor_layout): [b, s, h, d], [b, h, s, d] and
    token-flattened [t, h, d] (positions [t]: per token, so packed sequences need nothing else).
    With spec.inplace the result is written into x, as in-place serving kernels do."""
    layout = getattr(spec, "tensor_layout", "bshd")
    if layout == "bhsd":
        out = apply_tables(x.transpose(1, 2), *cache(positions, spec), spec).transpose(1, 2)
    elif layout == "thd":
        out = apply_tables(x[None], *cache(positions[None], spec), spec)[0]
    else:
        out = apply_tables(x, *cache(positions, spec), spec)
    if getattr(spec, "inplace", False):
        x.copy_(out)
        return x
    return out


def apply_tables(x, cos, sin, spec):
    """x * cos + rotate_half(x) * sin for pair-order tables cos, sin [b, s, r/2] (attention factor
    included), cast to x.dtype; the tail past rotary_dim passes through."""
    if spec.layout != "half":
        raise Unsupported("rotate_half pairs (j, j + r/2): half layout only")
    r = spec.rotary_dim
    cos = torch.cat((cos, cos), dim=-1)[:, :, None, :].to(x.dtype)  # broadcast over heads
    sin = torch.cat((sin, sin), dim=-1)[:, :, None, :].to(x.dtype)
    x_rot, x_pass = x[..., :r], x[..., r:]
    out = x_rot * cos + rotate_half(x_rot) * sin
    return torch.cat((out, x_pass), dim=-1)


def apply_qk(q, k, positions, spec):
    """q [.., heads, d] and k [.., kv_heads, d] rotated by the same cos/sin (any head counts)."""
    return apply(q, positions, spec), apply(k, positions, spec)
