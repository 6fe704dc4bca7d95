"""Pair layouts and the NumPy rotation of pairs by given cos/sin tables.

Sources:
- "half" (GPT-NeoX, HF Llama/Qwen rotate_half; EleutherAI/gpt-neox
  megatron/model/positional_embeddings.py @007003aa): pair j is (x[j], x[j + r/2]), j = 0..r/2-1.
- "interleaved" (RoFormer eq. 34; GPT-J rotate_every_two, kingoflolz/mesh-transformer-jax
  mesh_transformer/layers.py @02850c46; Meta's complex form): pair i is (x[2i], x[2i+1]).
Both turn pair i by +m theta_i: (a, b) -> (a cos - b sin, a sin + b cos) (RoFormer eq. 15).
The fixed permutation perm = [0, 2, ..., r-2, 1, 3, ..., r-1] maps one onto the other:
half = interleaved[perm], and RoPE_half(x[perm]) = RoPE_interleaved(x)[perm].
"""

import numpy as np

from .validate import check_layout, check_rotary_dim, check_x, resolve_rotary_dim


def pair_indices(rotary_dim, layout):
    """(first, second) int64 index arrays [r/2] of each pair's two elements in the last axis."""
    r = check_rotary_dim(rotary_dim)
    if check_layout(layout) == "half":
        first = np.arange(r // 2, dtype=np.int64)
        return first, first + r // 2
    first = np.arange(0, r, 2, dtype=np.int64)
    return first, first + 1


def layout_permutation(rotary_dim):
    """perm int64[r] = [0, 2, ..., r-2, 1, 3, ..., r-1] with x_half = x_interleaved[..., perm]."""
    r = check_rotary_dim(rotary_dim)
    return np.concatenate([np.arange(0, r, 2), np.arange(1, r, 2)]).astype(np.int64)


def rotate_pairs(x, cos, sin, *, layout, rotary_dim=None):
    """Rotate the pairs of x by given tables; the tail beyond rotary_dim is copied unchanged.

    x: [batch, seq, heads, head_dim] of any real dtype (computed in float64);
    cos, sin: [batch, seq, r/2] float64 (pair order, independent of layout).
    Returns a new float64 array shaped like x. This is the building block for the reference
    mutants in diagnosis: any table (wrong base, shifted positions, ...) can be applied.
    """
    out = check_x(x)
    r = resolve_rotary_dim(rotary_dim, out.shape[3])
    layout = check_layout(layout)
    expected = out.shape[:2] + (r // 2,)
    c = np.asarray(cos, dtype=np.float64)
    s = np.asarray(sin, dtype=np.float64)
    for name, table in (("cos", c), ("sin", s)):
        if table.shape != expected:
            raise ValueError(f"{name}: shape {table.shape} must be [batch, seq, r/2] = {expected}")
    return _rotate_in_place(out, c, s, r, layout)


def _pair_slices(r, layout):
    """Basic slices (views, no gather) of the pairs' first and second elements."""
    if layout == "half":
        return slice(0, r // 2), slice(r // 2, r)
    return slice(0, r, 2), slice(1, r, 2)


def _rotate_in_place(out, c, s, r, layout):
    """out[..., pairs] turned by cos/sin tables [b, s, r/2] (float64 arrays); returns out."""
    first, second = _pair_slices(r, layout)
    a = out[..., first].copy()
    b = out[..., second].copy()
    c = c[:, :, None, :]
    s = s[:, :, None, :]
    out[..., first] = a * c - b * s
    out[..., second] = a * s + b * c
    return out
