"""diffusers' 1-D RoPE, ``get_1d_rotary_pos_embed`` and ``apply_rotary_emb``
(diffusers.models.embeddings), graded through thin adapters as a diffusion model's port would
call them. Graded at diffusers 0.42.1.

``get_1d_rotary_pos_embed(dim, pos, theta, use_real=True, linear_factor, ntk_factor,
repeat_interleave_real, freqs_dtype)`` builds theta_i = 1 / (theta * ntk_factor) ** (2i / dim) /
linear_factor in ``freqs_dtype`` (float32 by default; Flux passes float64), the angles pos *
theta_i, and cos / sin tables of width dim: each entry repeated twice (``repeat_interleave_real=True``:
Flux, HunyuanDiT, CogVideoX; the interleaved layout) or the halves concatenated (False: Stable
Audio; the half layout). ``apply_rotary_emb(x, (cos, sin), use_real_unbind_dim=-1 | -2)`` rotates
pairs (2i, 2i+1) (-1) or (i, i + d/2) (-2) in float32 and casts back.

Scaling: posref's "linear" is ``linear_factor``; posref's "ntk" (NTK-aware, base * factor^(d/(d-2)))
is ``ntk_factor = factor ** (d / (d - 2))``: diffusers' ntk_factor multiplies the base itself. No
other scaling has a diffusers parameter: Unsupported. Partial rotary rotates the first
rotary_dim features and passes the rest, as Stable Audio's attention processor does. The tables
take one position vector: batch rows with their own positions are built one by one.

Adapters: ``cache`` and ``cache_float64`` (rope.cache: the float32 and Flux's float64
``freqs_dtype``), ``apply`` (rope.apply). Needs ``diffusers`` (the ``test`` extra); the tests skip
without it.
"""

import torch
from diffusers.models.embeddings import apply_rotary_emb, get_1d_rotary_pos_embed

from conformance import Unsupported

LIBRARY = "diffusers"
SURVEY = [("rope.cache", "cache"), ("rope.cache", "cache_float64"), ("rope.apply", "apply")]


def _factors(spec):
    """get_1d_rotary_pos_embed's (linear_factor, ntk_factor) for the spec's scaling."""
    scaling = spec.scaling or {}
    kind = scaling.get("rope_type", "default")
    if kind == "default":
        return 1.0, 1.0
    if kind == "linear":
        return float(scaling["factor"]), 1.0
    if kind == "ntk":
        d = spec.rotary_dim
        return 1.0, float(scaling["factor"]) ** (d / (d - 2))
    raise Unsupported(f"diffusers has linear_factor and ntk_factor only, no {kind!r} scaling")


def _tables(positions_row, spec, interleaved=True, freqs_dtype=torch.float32):
    linear, ntk = _factors(spec)
    return get_1d_rotary_pos_embed(spec.rotary_dim, positions_row, theta=spec.base, use_real=True,
                                   linear_factor=linear, ntk_factor=ntk, repeat_interleave_real=interleaved,
                                   freqs_dtype=freqs_dtype)  # each [s, rotary_dim]


def _cache(positions, spec, freqs_dtype):
    rows = [_tables(row, spec, freqs_dtype=freqs_dtype) for row in positions]
    cos = torch.stack([c[:, ::2] for c, _ in rows])  # each entry is repeated twice: pair order
    sin = torch.stack([s[:, ::2] for _, s in rows])
    return cos, sin


def cache(positions, spec):
    return _cache(positions, spec, torch.float32)


def cache_float64(positions, spec):
    return _cache(positions, spec, torch.float64)


def apply(x, positions, spec):
    if spec.tensor_layout != "bshd":
        raise Unsupported("x [batch, seq, heads, head_dim] only")
    interleaved = spec.layout == "interleaved"
    rd = spec.rotary_dim
    out = []
    for b in range(x.shape[0]):
        cos, sin = _tables(positions[b], spec, interleaved=interleaved)
        rotated = apply_rotary_emb(x[b:b + 1, ..., :rd], (cos, sin), use_real=True,
                                   use_real_unbind_dim=-1 if interleaved else -2, sequence_dim=1)
        out.append(torch.cat((rotated, x[b:b + 1, ..., rd:]), dim=-1))
    return torch.cat(out)
