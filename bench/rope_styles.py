"""Mainstream RoPE implementation styles, written here as posref adapters, for calibration.

These are the implementations the tolerance model (docs/tolerance.md) is calibrated with and the
runner's tests grade. Each follows the arithmetic of a public implementation (dtypes and order of
operations), re-typed here from the formulas (RoFormer eq. 34, docs/design.md):

- ``hf_rotate_half``      HF Llama / GPT-NeoX: inv_freq and the angle in float32, cos/sin in
                          float32 cast to the model dtype, ``x*cos + rotate_half(x)*sin`` in it;
- ``meta_complex``        Meta Llama: float32 angles, ``torch.polar`` (complex64), x upcast to
                          float32 as complex pairs, product, cast back (interleaved pairs);
- ``gptj_every_two``      GPT-J: float32 sin/cos tables, ``rotate_every_two`` and the products
                          promoted to float32, cast back to the model dtype (interleaved pairs);
- ``spec_following``      dispatches on ``spec.layout`` to the HF (half) or GPT-J (interleaved)
                          style: an implementation that follows the case's layout;
- ``bf16_angles`` / ``fp16_angles``  the classic precision bug: inv_freq, positions, the angle and
                          cos/sin computed in bfloat16 / float16 (e.g. after ``model.to(bf16)``
                          cast the inv_freq buffer). These must FAIL the standard profile.

Adapters for the other protocols: ``hf_cache`` (rope.cache) and ``hf_frequencies``
(rope.frequencies).
"""

from __future__ import annotations

import torch

from conformance import Unsupported


def _inv_freq_f32(rotary_dim: int, base: float, device) -> torch.Tensor:
    # HF _compute_default_rope_parameters: 1 / base ** (arange(0, dim, 2).float() / dim)
    exponent = torch.arange(0, rotary_dim, 2, dtype=torch.int64, device=device).float() / rotary_dim
    return 1.0 / (base**exponent)


def _angles_f32(positions: torch.Tensor, rotary_dim: int, base: float) -> torch.Tensor:
    """[b, s, r/2] float32: HF's ``inv_freq[None, :, None] @ position_ids[:, None, :]``."""
    inv = _inv_freq_f32(rotary_dim, base, positions.device)
    b = positions.shape[0]
    freqs = inv[None, :, None].expand(b, -1, 1) @ positions[:, None, :].float()
    return freqs.transpose(1, 2)


def _unscaled(spec) -> None:
    # These styles compute default RoPE only; a scaled case is not theirs to grade.
    if spec.scaling is not None:
        raise Unsupported("default RoPE only (no scaling)")


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def _rotate_every_two(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def _half_from_angles(x, angles, rotary_dim):
    emb = torch.cat((angles, angles), dim=-1)
    cos = emb.cos().to(x.dtype)[:, :, None, :]
    sin = emb.sin().to(x.dtype)[:, :, None, :]
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
    return torch.cat((x_rot * cos + _rotate_half(x_rot) * sin, x_pass), dim=-1)


def hf_rotate_half(x, positions, spec):
    """HF Llama ``apply_rotary_pos_emb`` with ``LlamaRotaryEmbedding`` (half layout only)."""
    _unscaled(spec)
    if spec.layout != "half":
        raise Unsupported("rotate_half pairs (j, j + r/2) only")
    return _half_from_angles(x, _angles_f32(positions, spec.rotary_dim, spec.base), spec.rotary_dim)


def _interleaved_only(spec) -> None:
    # Code written for one pair layout says so: posref grades every case it does not refuse.
    if spec.layout != "interleaved":
        raise Unsupported("pairs (2i, 2i+1) only")


def meta_complex(x, positions, spec):
    """Meta Llama ``precompute_freqs_cis`` + ``apply_rotary_emb`` (interleaved pairs)."""
    _unscaled(spec)
    _interleaved_only(spec)
    r = spec.rotary_dim
    freqs = _angles_f32(positions, r, spec.base)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64 [b, s, r/2]
    x_rot, x_pass = x[..., :r], x[..., r:]
    xc = torch.view_as_complex(x_rot.float().reshape(*x_rot.shape[:-1], -1, 2))
    out = torch.view_as_real(xc * freqs_cis[:, :, None, :]).flatten(3)
    return torch.cat((out.type_as(x), x_pass), dim=-1)


def gptj_every_two(x, positions, spec):
    """HF GPT-J ``create_sinusoidal_positions`` + ``apply_rotary_pos_emb`` (interleaved pairs)."""
    _unscaled(spec)
    _interleaved_only(spec)
    r = spec.rotary_dim
    # GPT-J: inv_freq from int64 arange / dim (true division gives float32), einsum in float32.
    inv = 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.int64, device=x.device) / r))
    sinusoid = torch.einsum("bs,j->bsj", positions.float(), inv.float()).float()
    sin = torch.repeat_interleave(torch.sin(sinusoid)[:, :, None, :], 2, 3)
    cos = torch.repeat_interleave(torch.cos(sinusoid)[:, :, None, :], 2, 3)
    x_rot, x_pass = x[..., :r], x[..., r:]
    # x (model dtype) times float32 tables promotes to float32; the result is cast back once.
    out = (x_rot * cos) + (_rotate_every_two(x_rot) * sin)
    return torch.cat((out.to(x.dtype), x_pass), dim=-1)


def spec_following(x, positions, spec):
    """Follows ``spec.layout``: HF rotate_half for "half", GPT-J rotate_every_two otherwise."""
    _unscaled(spec)
    if spec.layout == "half":
        return _half_from_angles(x, _angles_f32(positions, spec.rotary_dim, spec.base), spec.rotary_dim)
    return gptj_every_two(x, positions, spec)


def _low_precision_angles(x, positions, spec, dtype):
    _unscaled(spec)
    r = spec.rotary_dim
    inv = _inv_freq_f32(r, spec.base, x.device).to(dtype)  # the buffer cast with the model
    angles = positions.to(dtype)[..., None] * inv  # [b, s, r/2], computed in `dtype`
    return _half_from_angles(x, angles, r) if spec.layout == "half" else _interleaved_from_angles(x, angles, r)


def _interleaved_from_angles(x, angles, rotary_dim):
    cos = torch.repeat_interleave(angles.cos().to(x.dtype)[:, :, None, :], 2, 3)
    sin = torch.repeat_interleave(angles.sin().to(x.dtype)[:, :, None, :], 2, 3)
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
    return torch.cat((x_rot * cos + _rotate_every_two(x_rot) * sin, x_pass), dim=-1)


def bf16_angles(x, positions, spec):
    """BUGGY: angles and cos/sin computed in bfloat16 (follows spec.layout)."""
    return _low_precision_angles(x, positions, spec, torch.bfloat16)


def fp16_angles(x, positions, spec):
    """BUGGY: angles and cos/sin computed in float16 (follows spec.layout)."""
    return _low_precision_angles(x, positions, spec, torch.float16)


def hf_cache(positions, spec):
    """rope.cache: HF's float32 cos/sin table, [b, s, r/2] in pair order, float32."""
    _unscaled(spec)
    angles = _angles_f32(positions, spec.rotary_dim, spec.base)
    return angles.cos(), angles.sin()


def hf_frequencies(spec, seq_len):
    """rope.frequencies: HF default rope parameters (float32 inv_freq, attention factor 1)."""
    if spec.scaling:
        raise Unsupported("default rope_type only")
    return _inv_freq_f32(spec.rotary_dim, spec.base, "cpu"), 1.0
