"""Gaussian-kernel RoPE: the kernel K(m), f(x, m) = K(m) R_m x and the score form (see __init__)."""

from __future__ import annotations

import math

import mpmath
import numpy as np

from reference.rope import phase
from reference.rope._validate import (check_backend, check_base, check_layout, check_mode, check_positions,
                                      check_x, resolve_rotary_dim)

DOCUMENT_KERNEL = {"a1": 0.7, "a2": 0.3, "s1": 5.0, "s2": 20.0}  # seed document 002's example


def check_kernel(kernel) -> tuple[float, float, float, float]:
    """(a1, a2, s1, s2) as floats; ValueError naming the bad key."""
    if not isinstance(kernel, dict) or set(kernel) != {"a1", "a2", "s1", "s2"}:
        raise ValueError(f"kernel: must be a dict with keys a1, a2, s1, s2, got {kernel!r}")
    out = []
    for key in ("a1", "a2", "s1", "s2"):
        v = kernel[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"kernel: {key} must be a finite number, got {v!r}")
        if (key[0] == "a" and v < 0) or (key[0] == "s" and v <= 0):
            raise ValueError(f"kernel: {key} must be {'>= 0' if key[0] == 'a' else '> 0'}, got {v!r}")
        out.append(float(v))
    return tuple(out)


def kernel_mp(m, kernel):
    """K(m) as an mpf at the current mpmath precision (parameters taken exactly as float64)."""
    a1, a2, s1, s2 = (mpmath.mpf(v) for v in check_kernel(kernel))
    m = mpmath.mpf(int(m))
    return a1 * mpmath.exp(-m * m / (2 * s1 * s1)) + a2 * mpmath.exp(-m * m / (2 * s2 * s2))


def _factor(kernel):
    cache: dict = {}

    def factor(prec, m):
        key = (prec, m)
        if key not in cache:
            with mpmath.workprec(prec):
                cache[key] = kernel_mp(m, kernel)
        return cache[key]

    return factor


def kernel(positions, kernel, mode="fast") -> np.ndarray:
    """K(m) float64 for integer positions of any shape. fast: numpy exp (within a few ulp);
    golden: correctly rounded (subnormals and 0 included)."""
    m = check_positions(positions)
    a1, a2, s1, s2 = check_kernel(kernel)
    if check_mode(mode) == "fast":
        mf = m.astype(np.float64)
        return a1 * np.exp(-(mf * mf) / (2 * s1 * s1)) + a2 * np.exp(-(mf * mf) / (2 * s2 * s2))
    factor = _factor(kernel)
    flat = [phase._settle(lambda prec, p=int(p): (factor(prec, p), abs(factor(prec, p)) * mpmath.mpf(2) ** (4 - prec)))
            for p in m.reshape(-1)]
    return np.array(flat, dtype=np.float64).reshape(m.shape)


def apply(x, positions, *, kernel, rotary_dim=None, base=10000.0, layout="half", backend="cpu", mode="fast"):
    """K(m) R_m x, float64 [batch, seq, heads, head_dim] (the whole vector scaled by K(m)).

    x, positions, rotary_dim, base, layout, backend as reference.rope.apply. mode "fast": the
    fast rotation times K(m) in float64; "golden": each output the nearest double to the exact
    K(m) (a cos - b sin) (resp. K(m) x_j in the tail).
    """
    check_kernel(kernel)
    out = check_x(x)
    r = resolve_rotary_dim(rotary_dim, out.shape[3])
    b = check_base(base)
    layout = check_layout(layout)
    m = check_positions(positions, out.shape[:2])
    backend = check_backend(backend)
    mode = check_mode(mode)
    return phase.scaled_rotate(out, m, phase.ladder(r, b), _factor(kernel), r, layout, backend, mode,
                               scale_tail=True)


def score(q, k, q_positions, k_positions, *, kernel, rotary_dim=None, base=10000.0, layout="half"):
    """The score form K(n - m) q_m^T R_(n-m) k_n, float64 [batch, heads, sq, sk] for q [b, sq, h, d]
    at positions [b, sq] (m) and k [b, sk, h, d] at [b, sk] (n). Uses <R_m q, R_n k> =
    q^T R_(n-m) k (RoFormer eq. 16): both rotated by the fast reference, the dot product with
    math.fsum, times K(n - m)."""
    from reference import rope

    qr = rope.apply(q, q_positions, rotary_dim=rotary_dim, base=base, layout=layout, backend="numpy")
    kr = rope.apply(k, k_positions, rotary_dim=rotary_dim, base=base, layout=layout, backend="numpy")
    qp, kp = np.asarray(q_positions), np.asarray(k_positions)
    nb, sq, nh, _ = qr.shape
    sk = kr.shape[1]
    out = np.empty((nb, nh, sq, sk))
    for b_, h, i, j in np.ndindex(nb, nh, sq, sk):
        kern = kernel_of_distance(int(kp[b_, j]) - int(qp[b_, i]), kernel)
        out[b_, h, i, j] = kern * math.fsum(qr[b_, i, h] * kr[b_, j, h])
    return out


def kernel_of_distance(distance: int, params) -> float:
    """K(n - m) in float64 (the fast kernel at one integer distance)."""
    return float(kernel(np.array([int(distance)]), params)[0])
