"""Gaussian-kernel RoPE identities (seed document 002), on the reference in golden mode.

Golden outputs are correctly rounded (relative error <= u = 2^-53 per element), dot products are
summed with math.fsum. The absolute form f(x, m) = K(m) R_m x is *not* shift invariant (violated
by design: K depends on the absolute position); the score form K(n - m) q^T R_(n-m) k is.
"""

from __future__ import annotations

import math

import numpy as np

from reference import rope
from reference.gaussian_rope import DOCUMENT_KERNEL, apply, kernel, score
from reference.identities import register

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
            plain = _dot(rope.apply(q, np.array([[m]]), backend="numpy"), rope.apply(k, np.array([[n]]), backend="numpy"))
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
