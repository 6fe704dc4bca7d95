"""The backward pass of a rotation by a frequency table, in float64: the vector-Jacobian product
(VJP) of ``reference.numerics.rotation.apply`` (RoPE's apply, reused by every rotary family), and
the adjoint-identity helpers every rotary family's identities use.

Formula. For one token at position m, apply is the linear map y = f R_m x on each rotated pair
(f the attention factor of a scaling type, 1 without one; RoFormer, arXiv 2104.09864, eq. 15) and
y = x on the tail past rotary_dim. Its Jacobian is that same matrix, so the VJP of a cotangent g is

    grad_x = (f R_m)^T g = f R_m^T g = f R_{-m} g   on the pairs,     grad_x = g   on the tail,

because a rotation is orthogonal and R_m^T = R_{-m} (RoFormer eq. 16). Shapes: g [batch, seq,
heads, head_dim] (any real dtype, computed in float64), positions int [batch, seq]; the result is
float64 shaped like g. ``apply_vjp`` is apply at -m (positions negated exactly): fast mode has the
forward's accuracy, golden mode is the VJP correctly rounded, and it equals the transposed rotation
built from the forward's own table bit for bit (``transposed_rotation``). The derivation in full,
and RoPE's backward mutants: reference/rope/backward.py.

Never imports torch.
"""

from __future__ import annotations

import math

import numpy as np

from .layouts import pair_indices, rotate_pairs
from .rotation import apply, cos_sin
from .validate import check_layout, check_positions, resolve_rotary_dim

__all__ = ["adjoint_residual", "apply_jvp", "apply_vjp", "check_cotangent", "pair_weights", "transposed_rotation"]


def check_cotangent(g, name="g") -> np.ndarray:
    """g: a 4-D real array [batch, seq, heads, head_dim]; a fresh float64 C-order copy.

    ValueError naming ``name`` otherwise (the forward's checks would name ``x``)."""
    arr = np.asarray(g)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name}: must have a real numeric dtype, got {arr.dtype}")
    if arr.ndim != 4:
        raise ValueError(f"{name}: must be 4-D [batch, seq, heads, head_dim], got shape {arr.shape}")
    return np.array(arr, dtype=np.float64, order="C", copy=True)


def apply_vjp(g, positions, *, rotary_dim=None, base=10000.0, layout="half", scaling=None, seq_len=None,
              backend="cpu", mode="fast"):
    """grad_x = f R_{-m} g on the rotated pairs, g on the tail: the VJP of apply (reference.rope.apply).

    g: cotangent [batch, seq, heads, head_dim]; positions int [batch, seq] (|m| <= 2**53);
    rotary_dim, base, layout, scaling, seq_len, backend, mode: as reference.rope.apply.
    Returns float64 shaped like g. fast: the forward kernels at -m (4 pair-ulps); golden: each
    value the nearest double to the exact VJP.
    """
    cot = check_cotangent(g)
    m = check_positions(positions, cot.shape[:2])  # |m| <= 2**53, so -m cannot overflow
    return apply(cot, -m, rotary_dim=rotary_dim, base=base, layout=layout, scaling=scaling,
                      seq_len=seq_len, backend=backend, mode=mode)


def apply_jvp(dx, positions, **kwargs):
    """J dx, the Jacobian-vector product: apply is linear in x, so it is apply itself."""
    return apply(dx, positions, **kwargs)


def transposed_rotation(g, positions, *, rotary_dim=None, base=10000.0, layout="half", scaling=None,
                        seq_len=None, backend="cpu", mode="fast"):
    """(f R_m)^T g built from the forward's own cos/sin table at +m: pairs (a c + b s, b c - a s)
    with (c, s) = f (cos, sin) of m theta_i, the tail copied. This is what autograd computes from
    the saved table; it equals apply_vjp bit for bit (the table is odd/even in m bit for bit)."""
    cot = check_cotangent(g)
    r = resolve_rotary_dim(rotary_dim, cot.shape[3])
    m = check_positions(positions, cot.shape[:2])
    c, s = cos_sin(m, r, base, scaling=scaling, seq_len=seq_len, backend=backend, mode=mode)
    return rotate_pairs(cot, c, -s, layout=check_layout(layout), rotary_dim=r)


# ---- the adjoint identity <VJP(g), dx> = <g, J dx>, used by every rotary family's identities ----


def pair_weights(g, dx, rotary_dim, layout, amplitude=None) -> np.ndarray:
    """N_t = sum_pairs A |g_pair| |dx_pair| + sum_tail A_tail |g_j| |dx_j| per token and head
    ([..., ] = g.shape[:-1]): the scale of the adjoint residual. amplitude: None (1), or a pair of
    arrays (A on the pairs [..., r/2], A on the tail [...]) broadcastable against them."""
    g = np.asarray(g, dtype=np.float64)
    dx = np.asarray(dx, dtype=np.float64)
    first, second = pair_indices(rotary_dim, layout)
    pairs = np.hypot(g[..., first], g[..., second]) * np.hypot(dx[..., first], dx[..., second])
    tail = np.abs(g[..., rotary_dim:] * dx[..., rotary_dim:]).sum(axis=-1)
    if amplitude is not None:
        pairs = pairs * amplitude[0]
        tail = tail * amplitude[1]
    return pairs.sum(axis=-1) + tail


def adjoint_residual(grad, dx, g, jdx, weights) -> float:
    """max over tokens and heads of |<grad, dx> - <g, J dx>| / N, each dot product over the last
    axis summed with math.fsum (correctly rounded); weights N as from ``pair_weights``."""
    grad, dx, g, jdx = (np.asarray(a, dtype=np.float64) for a in (grad, dx, g, jdx))
    lhs = np.array([math.fsum(row) for row in (grad * dx).reshape(-1, grad.shape[-1])])
    rhs = np.array([math.fsum(row) for row in (g * jdx).reshape(-1, g.shape[-1])])
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(lhs == rhs, 0.0, np.abs(lhs - rhs) / w)
    return float(np.max(r)) if r.size else 0.0
