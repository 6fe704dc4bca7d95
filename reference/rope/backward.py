"""RoPE's backward pass in float64: the vector-Jacobian product (VJP) of ``reference.rope.apply``.

Formula. For one token at position m, apply is the linear map y = f R_m x on each rotated pair
(f the attention factor of a scaling type, 1 without one; RoFormer, arXiv 2104.09864, eq. 15) and
y = x on the tail past rotary_dim. Its Jacobian is that same matrix, so the VJP of a cotangent g is

    grad_x = (f R_m)^T g = f R_m^T g = f R_{-m} g   on the pairs,     grad_x = g   on the tail,

because a rotation is orthogonal and R_m^T = R_{-m} (RoFormer eq. 16 uses the same fact). Per pair
(a, b) of g this is (a cos + b sin, -a sin + b cos), phi = m theta_i. The attention factor f is a
constant (it does not depend on x), so it enters the backward exactly as in the forward.

Shapes: g [batch, seq, heads, head_dim] (any real dtype, computed in float64), positions int
[batch, seq]; the result is float64 shaped like g.

Implementation. ``apply_vjp`` is ``reference.rope.apply`` at -m (positions negated exactly), so:

- mode "fast" reuses the forward kernels of the chosen backend ("cpu" Numba, "cuda", "numpy" twin)
  and has the forward's accuracy: each output within (2 kappa + 2)(1 + 2**-50) ulps of its pair's
  norm (4 for kappa = 1, reference/rope/ACCURACY.md);
- mode "golden" is the golden forward at -m, which returns the float64 nearest to the exact
  f (a cos + b sin) (resp. f (b cos - a sin)): the VJP correctly rounded;
- the reduction m theta mod pi/2 is exact for every |m| <= 2**53, so -m is as accurate as m; the
  fast and golden cos/sin tables are odd/even bit for bit (cos(-phi) = cos(phi), sin(-phi) =
  -sin(phi)), which makes apply_vjp identical, bit for bit, to the transposed rotation built from
  the forward's own table (``transposed_rotation``; identity ``rope.backward-is-inverse-rotation``).

Mutants for diagnosis (the usual ways a hand-written backward goes wrong, each a function of the
same arguments as apply_vjp; ``mutants`` returns them by diagnosis code):

- backward-transposed: the gradient rotated by R_m instead of R_{-m} (the forward reused as is);
- backward-layout: the transpose of the other pair layout (half vs interleaved);
- backward-missing: no gradient reaches x (zeros; a detached output, or the tail dropped);
- backward-scale: the right rotation with the wrong amplitude (attention factor f missing, or
  applied twice: 1 or f**2 instead of f); for an unscaled spec the mutant is 2 R_{-m} g.

Never imports torch.
"""

from __future__ import annotations

import numpy as np

from . import core
from ._validate import check_layout, check_positions, resolve_rotary_dim
from .layouts import pair_indices, rotate_pairs
from .theta import frequencies

__all__ = ["apply_vjp", "apply_jvp", "transposed_rotation", "mutants", "MUTANT_CODES"]

MUTANT_CODES = ("backward-transposed", "backward-layout", "backward-missing", "backward-scale")


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
    """grad_x = f R_{-m} g on the rotated pairs, g on the tail: the VJP of reference.rope.apply.

    g: cotangent [batch, seq, heads, head_dim]; positions int [batch, seq] (|m| <= 2**53);
    rotary_dim, base, layout, scaling, seq_len, backend, mode: as reference.rope.apply.
    Returns float64 shaped like g. fast: the forward kernels at -m (4 pair-ulps); golden: each
    value the nearest double to the exact VJP.
    """
    cot = check_cotangent(g)
    m = check_positions(positions, cot.shape[:2])  # |m| <= 2**53, so -m cannot overflow
    return core.apply(cot, -m, rotary_dim=rotary_dim, base=base, layout=layout, scaling=scaling,
                      seq_len=seq_len, backend=backend, mode=mode)


def apply_jvp(dx, positions, **kwargs):
    """J dx, the Jacobian-vector product: apply is linear in x, so it is apply itself."""
    return core.apply(dx, positions, **kwargs)


def transposed_rotation(g, positions, *, rotary_dim=None, base=10000.0, layout="half", scaling=None,
                        seq_len=None, backend="cpu", mode="fast"):
    """(f R_m)^T g built from the forward's own cos/sin table at +m: pairs (a c + b s, b c - a s)
    with (c, s) = f (cos, sin) of m theta_i, the tail copied. This is what autograd computes from
    the saved table; it equals apply_vjp bit for bit (the table is odd/even in m bit for bit)."""
    cot = check_cotangent(g)
    r = resolve_rotary_dim(rotary_dim, cot.shape[3])
    m = check_positions(positions, cot.shape[:2])
    c, s = core.cos_sin(m, r, base, scaling=scaling, seq_len=seq_len, backend=backend, mode=mode)
    return rotate_pairs(cot, c, -s, layout=check_layout(layout), rotary_dim=r)


def _attention_factor(r, base, scaling, seq_len) -> float:
    return frequencies(r, base, scaling, seq_len)[1]


def mutants(g, positions, *, rotary_dim=None, base=10000.0, layout="half", scaling=None, seq_len=None,
            backend="numpy", mode="fast") -> dict:
    """{diagnosis code: list of (description, wrong gradient float64 like g)} for the mistakes a
    backward makes (module docstring). Each candidate is exact where the mistake is (computed with
    the same reference kernels), so a conformance diagnosis can grade a user's gradient against it
    with the gradient budget: within budget of a mutant and over budget of the reference names it.
    """
    cot = check_cotangent(g)
    r = resolve_rotary_dim(rotary_dim, cot.shape[3])
    layout = check_layout(layout)
    m = check_positions(positions, cot.shape[:2])
    kw = dict(rotary_dim=r, base=base, scaling=scaling, seq_len=seq_len, backend=backend, mode=mode)
    other = "interleaved" if layout == "half" else "half"
    right = apply_vjp(cot, m, layout=layout, **kw)
    f = _attention_factor(r, base, scaling, seq_len)
    first, second = pair_indices(r, layout)
    pairs = np.concatenate([first, second])

    def rescaled(c):
        out = right.copy()
        out[..., pairs] *= c
        return out

    no_tail = right.copy()
    no_tail[..., r:] = 0.0
    scale = ([("the attention factor is missing from the backward (1 instead of f)", rescaled(1.0 / f)),
              ("the attention factor is applied twice in the backward (f**2 instead of f)", rescaled(f))]
             if f != 1.0 else [("the rotated pairs' gradient is doubled", rescaled(2.0))])
    out = {
        "backward-transposed": [("the gradient is rotated by R_m (the forward) instead of R_{-m}",
                                 core.apply(cot, m, layout=layout, **kw))],
        "backward-layout": [(f"the gradient is paired in the {other} layout", apply_vjp(cot, m, layout=other, **kw))],
        "backward-missing": [("no gradient reaches x (zeros, or the output is detached)", np.zeros_like(cot))],
        "backward-scale": scale,
    }
    if r < cot.shape[3]:
        out["backward-missing"].append(("the pass-through tail gets no gradient", no_tail))
    return out


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
    import math

    grad, dx, g, jdx = (np.asarray(a, dtype=np.float64) for a in (grad, dx, g, jdx))
    lhs = np.array([math.fsum(row) for row in (grad * dx).reshape(-1, grad.shape[-1])])
    rhs = np.array([math.fsum(row) for row in (g * jdx).reshape(-1, g.shape[-1])])
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(lhs == rhs, 0.0, np.abs(lhs - rhs) / w)
    return float(np.max(r)) if r.size else 0.0
