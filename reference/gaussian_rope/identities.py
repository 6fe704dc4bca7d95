"""Gaussian-kernel RoPE identities (seed document 002), on the reference in golden mode.

Golden outputs are correctly rounded (relative error <= u = 2^-53 per element), dot products are
summed with math.fsum. The absolute form f(x, m) = K(m) R_m x is *not* shift invariant (violated
by design: K depends on the absolute position); the score form K(n - m) q^T R_(n-m) k is.
"""

from __future__ import annotations

import math

import numpy as np

from reference.gaussian_rope import DOCUMENT_KERNEL, apply, backward, kernel, score
from reference.identities import register
from reference.numerics import rotation, rotation_backward

U = 2.0 ** -53
D = 64
POSITIONS = (0, 1, 3, 7, 20, 50, 100)


def _inputs(seed, count=2):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, 1, 1, D)) for _ in range(count)]


def _f(x, m):
    return apply(x, np.array([[m]]), kernel=DOCUMENT_KERNEL, backend="numpy", mode="golden")[0, 0, 0]


def _dot(a, b):
    return math.fsum((np.asarray(a) * np.asarray(b)).reshape(-1))


@register(id="gaussian_rope.norm-scales-by-kernel", bound=8 * U,
          statement="||f(x, m)|| = K(m) ||x|| (the rotation keeps norms; m = 0..100, document kernel)")
def norm_scales() -> float:
    """Residual: max | ||f(x, m)|| / (K(m) ||x||) - 1 |. Bound 8u: each golden output is within
    u of K(m) times the rotated element (relative), so the squared norm within 2u + its fsum (u),
    the square root halves it, K(m) in float64 adds 2u and the division u."""
    (x,) = _inputs(1, 1)
    worst = 0.0
    for m in POSITIONS:
        k = float(kernel(np.array([m]), DOCUMENT_KERNEL, mode="golden")[0])
        worst = max(worst, abs(math.sqrt(_dot(_f(x, m), _f(x, m))) / (k * math.sqrt(_dot(x, x))) - 1.0))
    return worst


@register(id="gaussian_rope.score-factors", bound=32 * U,
          statement="<f(q, m), f(k, n)> = K(m) K(n) q^T R_(n-m) k (m, n = 0..100)")
def score_factors() -> float:
    """Residual: max |lhs - rhs| / (K(m) K(n) ||q|| ||k||). Bound 32u: the left side sums products
    of correctly rounded outputs (2u relative each, fsum), the right side rotates q and k with the
    fast reference (4 pair-ulps each, RoFormer eq. 16 in reference.rope) and multiplies by two
    correctly rounded kernels; 32u covers both with margin."""
    q, k = _inputs(2)
    worst = 0.0
    for m in POSITIONS:
        for n in POSITIONS:
            lhs = _dot(_f(q, m), _f(k, n))
            km, kn = (float(kernel(np.array([p]), DOCUMENT_KERNEL, mode="golden")[0]) for p in (m, n))
            plain = _dot(rotation.apply(q, np.array([[m]]), backend="numpy"),
                         rotation.apply(k, np.array([[n]]), backend="numpy"))
            scale = km * kn * math.sqrt(_dot(q, q) * _dot(k, k))
            if scale > 0:
                worst = max(worst, abs(lhs - km * kn * plain) / scale)
    return worst


@register(id="gaussian_rope.absolute-shift-invariance", bound=1e-9, expect="violated-by-design",
          statement="<f(q, m + s), f(k, n + s)> = <f(q, m), f(k, n)> fails for the absolute form: K(m) "
          "depends on the absolute position (shifts s = 1..20)")
def absolute_shift() -> float:
    """Residual: max |<f(q, m+s), f(k, n+s)> - <f(q, m), f(k, n)>| / (||q|| ||k||). Plain RoPE
    keeps this at rounding level (rope.relative-position); here K(m + s) K(n + s) != K(m) K(n), so it
    is of the order of the kernel's change: far above the 1e-9 bound, by design."""
    q, k = _inputs(3)
    norm = math.sqrt(_dot(q, q) * _dot(k, k))
    worst = 0.0
    for m, n in ((0, 0), (1, 3), (5, 2)):
        base = _dot(_f(q, m), _f(k, n))
        for s in (1, 5, 20):
            worst = max(worst, abs(_dot(_f(q, m + s), _f(k, n + s)) - base) / norm)
    return worst


@register(id="gaussian_rope.score-shift-invariance", bound=32 * U,
          statement="the score form K(n - m) q^T R_(n-m) k depends on n - m only (shifts s up to 2^20)")
def score_shift() -> float:
    """Residual: max |score(m + s, n + s) - score(m, n)| / (||q|| ||k||). Bound 32u: K(n - m) is
    the same float64 on both sides; the rotated dot products agree to the fast reference's
    rounding (4 pair-ulps per rotated vector, RoFormer eq. 16)."""
    q, k = _inputs(4)
    norm = math.sqrt(_dot(q, q) * _dot(k, k))
    worst = 0.0
    for m, n in ((0, 0), (1, 3), (5, 2), (10, 40)):
        ref = score(q, k, np.array([[m]]), np.array([[n]]), kernel=DOCUMENT_KERNEL)[0, 0, 0, 0]
        for s in (1, 100, 2**20):
            got = score(q, k, np.array([[m + s]]), np.array([[n + s]]), kernel=DOCUMENT_KERNEL)[0, 0, 0, 0]
            worst = max(worst, abs(got - ref) / norm)
    return worst


# ---- the backward pass (reference/gaussian_rope/backward.py) ------------------------------------

# K(m) normal up to m = 759 (the bound is relative to K); 2**20 is exactly 0 on both sides
BACKWARD_POSITIONS = np.array([[0, 1, 3, 7, 20, 50, 100, 400, 700, 2**20]])


@register(id="gaussian_rope.backward-adjoint", bound=24 * U,
          statement="apply's VJP: <VJP(g), dx> = <g, K(m) R_m dx> per token and head (document kernel, "
          "m = 0..700 where K(m) is normal, and 2^20 where it is 0; rotary 48 of 64, both layouts, fast mode)")
def backward_adjoint() -> float:
    """Residual: max over tokens and heads of |<apply_vjp(g), dx> - <g, apply(dx)>| / N,
    N = K(m) (sum_pairs |g_pair| |dx_pair| + sum_tail |g_j| |dx_j|) (tokens with K(m) = 0 give 0 = 0).

    Bound 24u: both sides are RoPE's fast rotation (5u per element relative to the pair's norm) times
    K(m) rounded once (u) with one more rounding (u): 7u K |pair| per element, 9.9u K |pair| per pair,
    9.9u N in the dot product (Cauchy-Schwarz); the fsum dot adds 2u N. 11.9u N per side, 23.8u apart.
    """
    rng = np.random.default_rng(20240102)
    worst = 0.0
    for layout in ("half", "interleaved"):
        g = rng.standard_normal((1, BACKWARD_POSITIONS.shape[1], 2, D))
        dx = rng.standard_normal(g.shape)
        kw = dict(kernel=DOCUMENT_KERNEL, rotary_dim=48, layout=layout, backend="numpy")
        grad = backward.apply_vjp(g, BACKWARD_POSITIONS, **kw)
        jdx = apply(dx, BACKWARD_POSITIONS, **kw)
        amp = kernel(BACKWARD_POSITIONS, DOCUMENT_KERNEL)[:, :, None]
        weights = rotation_backward.pair_weights(g, dx, 48, layout, (amp[..., None], amp))
        worst = max(worst, rotation_backward.adjoint_residual(grad, dx, g, jdx, weights))
    return worst


@register(id="gaussian_rope.backward-score-adjoint", bound=48 * U,
          statement="score's VJP: <grad_q, dq> + <grad_k, dk> = sum_ij G_ij (S(dq, k) + S(q, dk))_ij "
          "(S bilinear; document kernel, sq, sk <= 8, distances up to 60)")
def backward_score_adjoint() -> float:
    """Residual: |lhs - rhs| / N per batch row and head, N = sum_ij |G_ij| K_ij (|dq_i| |k_j| +
    |q_i| |dk_j|), K_ij = K(n_j - m_i) as computed (the same float64 values on both sides).

    Bound 48u. lhs: W = G K rounded (u), the einsum over at most 8 keys (8u, recursive summation),
    the rotation of k before (7.1u) and the one back (7.1u), the fsum dot with dq (2u): 25.2u N.
    rhs: each score is two rotations (14.2u), an fsum dot (2u), the product by K (u); G S and the
    fsum over i, j add 2u: 19.2u N. Together 44.4u, rounded up to 48u.
    """
    rng = np.random.default_rng(20240103)
    worst = 0.0
    for layout, (sq, sk) in (("half", (3, 5)), ("interleaved", (8, 8)), ("half", (1, 7))):
        q = rng.standard_normal((2, sq, 2, 24))
        k = rng.standard_normal((2, sk, 2, 24))
        dq, dk = rng.standard_normal(q.shape), rng.standard_normal(k.shape)
        qp = rng.integers(0, 60, (2, sq))
        kp = rng.integers(0, 60, (2, sk))
        G = rng.standard_normal((2, 2, sq, sk))
        kw = dict(kernel=DOCUMENT_KERNEL, rotary_dim=16, layout=layout)
        gq, gk = backward.score_vjp(G, q, k, qp, kp, **kw)
        s1 = score(dq, k, qp, kp, **kw)
        s2 = score(q, dk, qp, kp, **kw)
        kern = kernel(kp[:, None, :] - qp[:, :, None], DOCUMENT_KERNEL)[:, None]  # [b, 1, sq, sk]
        nq, nk = np.linalg.norm(q, axis=-1), np.linalg.norm(k, axis=-1)  # [b, s, h]
        ndq, ndk = np.linalg.norm(dq, axis=-1), np.linalg.norm(dk, axis=-1)
        scale = np.abs(G) * kern * (np.einsum("bih,bjh->bhij", ndq, nk) + np.einsum("bih,bjh->bhij", nq, ndk))
        for b, h in np.ndindex(2, 2):
            lhs = math.fsum([_dot(gq[b, :, h], dq[b, :, h]), _dot(gk[b, :, h], dk[b, :, h])])
            rhs = _dot(G[b, h], s1[b, h] + s2[b, h])
            worst = max(worst, abs(lhs - rhs) / float(np.sum(scale[b, h])))
    return worst
