"""Axial 2-D RoPE identities, on the reference in golden mode."""

from __future__ import annotations

import numpy as np

from reference.identities import register
from reference.numerics import rotation, rotation_backward
from reference.numerics.layouts import pair_indices
from reference.rope2d import apply, backward
from reference.rope2d.vectors import grid_coords, mixed_freqs

D = 32


def _x(seed):
    return np.random.default_rng(seed).standard_normal((1, 6, 1, D))


COORDS = np.array([[[0, 0], [1, 0], [0, 1], [5, 3], [13, 13], [2**10, 7]]])


@register(id="rope2d.separable", bound=0.0,
          statement="axial 2-D RoPE is separable: the first-axis pairs depend on x only and the second-axis "
          "pairs on y only (golden, both layouts)")
def separable() -> float:
    """Residual: max change of the first-axis pairs when y changes, and of the second-axis pairs when
    x changes. Bound 0: each pair's angle reads one coordinate, and golden values are exact functions
    of it."""
    x = _x(1)
    worst = 0.0
    for layout in ("interleaved", "half"):
        first, second = pair_indices(D, layout)
        xa, xb = np.concatenate([first[: D // 4], second[: D // 4]]), np.concatenate([first[D // 4:], second[D // 4:]])
        base = apply(x, COORDS, layout=layout, mode="golden", backend="numpy")
        moved_y = apply(x, COORDS + np.array([0, 5]), layout=layout, mode="golden", backend="numpy")
        moved_x = apply(x, COORDS + np.array([5, 0]), layout=layout, mode="golden", backend="numpy")
        worst = max(worst, float(np.max(np.abs(moved_y[..., xa] - base[..., xa]))),
                    float(np.max(np.abs(moved_x[..., xb] - base[..., xb]))))
    return worst


@register(id="rope2d.row-is-1d-rope", bound=0.0,
          statement="with y = 0 the first-axis pairs are 1-D RoPE of those features with theta_k = base^(-4k/d), "
          "and the second-axis pairs are untouched (half layout, golden)")
def row_is_1d() -> float:
    """Residual: max |2-D output - 1-D RoPE (rotary_dim d/2 over the first-axis features, base) |
    over a row y = 0. Bound 0: the same angles x theta_k, correctly rounded on both sides."""
    x = _x(2)
    coords = COORDS.copy()
    coords[..., 1] = 0
    out = apply(x, coords, base=100.0, layout="half", mode="golden", backend="numpy")
    # the first-axis pairs of the half layout are (i, i + d/2) for i < d/4: gather them as a head of d/2
    q = D // 4
    sub = np.concatenate([x[..., :q], x[..., D // 2: D // 2 + q]], axis=-1)
    one_d = rotation.apply(sub, coords[..., 0], base=100.0, layout="half", mode="golden", backend="numpy")
    got = np.concatenate([out[..., :q], out[..., D // 2: D // 2 + q]], axis=-1)
    untouched = np.concatenate([out[..., q: D // 2], out[..., D // 2 + q:]], axis=-1)
    rest = np.concatenate([x[..., q: D // 2], x[..., D // 2 + q:]], axis=-1)
    return max(float(np.max(np.abs(got - one_d))), float(np.max(np.abs(untouched - rest))))


@register(id="rope2d.resolution-change", bound=0.0,
          statement="after a change of resolution, positions recomputed for the new grid give the same outputs as "
          "computing those coordinates directly: each patch depends on its own (x, y) only (golden; axial and mixed)")
def resolution_change() -> float:
    """Residual: max difference between the patches of a 4 x 6 grid computed inside an 8 x 12 grid
    and the 4 x 6 grid computed on its own (row-major positions recomputed). Bound 0: golden values
    are exact functions of each patch's input and coordinates."""
    big, small = grid_coords(8, 12, 0), grid_coords(4, 6, 0)
    keep = [y * 12 + x for y in range(4) for x in range(6)]
    worst = 0.0
    for kw in ({}, {"freqs": np.array(mixed_freqs(1, D // 2))}):
        xb = np.random.default_rng(5).standard_normal((1, big.shape[1], 1, D))
        out_big = apply(xb, big, mode="golden", backend="numpy", **kw)
        out_small = apply(xb[:, keep], small, mode="golden", backend="numpy", **kw)
        worst = max(worst, float(np.max(np.abs(out_big[:, keep] - out_small))))
    return worst


# ---- the backward pass (reference/rope2d/backward.py) -------------------------------------------


@register(id="rope2d.backward-adjoint", bound=19 * 2.0**-53,
          statement="<VJP(g), dx> = <g, RoPE2d(dx)> per token and head (axial, both orders and layouts, a CLS "
          "token; RoPE-Mixed with random frequencies)")
def backward_adjoint() -> float:
    """Residual: max over tokens and heads of |<apply_vjp(g), dx> - <g, apply(dx)>| / N,
    N = sum_pairs |g_pair| |dx_pair|.

    Bound 19u, as mrope.backward-adjoint: both sides rotate with the same cos/sin values (the angle of
    -c is exactly minus the angle of c, and cos/sin are even/odd), 7.1u N per side from the rotation
    and 2u N from the fsum dot. For RoPE-Mixed the argument does not even need accurate cos/sin: the
    backward turns by exactly the computed forward angle, backwards.
    """
    rng = np.random.default_rng(2403_13298)
    worst = 0.0
    cases = ((dict(base=100.0, layout="interleaved", order=("x", "y"), cls_tokens=1), 2),
             (dict(base=1e4, layout="half", order=("y", "x"), cls_tokens=0), 2),
             (dict(layout="interleaved", cls_tokens=1, freqs=None), 2))
    for kw, heads in cases:
        g, dx = rng.standard_normal((2, 7, heads, 16)), rng.standard_normal((2, 7, heads, 16))
        coords = rng.integers(0, 64, (2, 7, 2))
        if "freqs" in kw:
            kw = dict(kw, freqs=rng.standard_normal((2, heads, 8)))
        grad = backward.apply_vjp(g, coords, backend="numpy", **kw)
        jdx = apply(dx, coords, backend="numpy", **kw)
        worst = max(worst, rotation_backward.adjoint_residual(grad, dx, g, jdx,
                                                          rotation_backward.pair_weights(g, dx, 16, kw["layout"])))
    return worst
