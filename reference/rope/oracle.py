"""mpmath oracle for RoPE: cos/sin and apply at high precision, for sampled cases.

Everything is recomputed from scratch in mpmath (theta_i = base**(-2i/r) with base and the
inputs taken exactly from their float64 values); nothing here shares code with the float64
reference. Default precision: 200 bits, enough for |m| up to 2**60 with > 100 correct bits.

Also the error measures the tests use: ``ulp_error`` (error in units of the last place of the
exact value) and ``pair_ulp_error`` for apply outputs (error in ulps of the pair's norm, since
a rotated coordinate can cancel to near zero while its absolute error stays ~ulp(|pair|)).
"""

import math

import mpmath
import numpy as np

PREC_BITS = 200


def _theta(i, rotary_dim, base):
    return mpmath.mpf(float(base)) ** (-(2 * mpmath.mpf(i)) / rotary_dim)


def cos_sin_exact(positions, rotary_dim, base=10000.0, prec=PREC_BITS):
    """Exact-to-prec (cos, sin) of m theta_i as nested lists of mpf, [n][r/2] for positions [n]."""
    with mpmath.workprec(prec):
        thetas = [_theta(i, rotary_dim, base) for i in range(rotary_dim // 2)]
        cos_rows, sin_rows = [], []
        for m in np.asarray(positions, dtype=np.int64).reshape(-1).tolist():
            cos_rows.append([mpmath.cos(m * t) for t in thetas])
            sin_rows.append([mpmath.sin(m * t) for t in thetas])
    return cos_rows, sin_rows


def apply_exact(x, positions, rotary_dim=None, base=10000.0, layout="half", prec=PREC_BITS):
    """Exact RoPE of x [b, s, h, d] (float64 inputs taken exactly), as an object array of mpf."""
    x = np.asarray(x, dtype=np.float64)
    nb, ns, nh, d = x.shape
    r = d if rotary_dim is None else rotary_dim
    half = r // 2
    pos = np.asarray(positions, dtype=np.int64)
    out = np.empty(x.shape, dtype=object)
    with mpmath.workprec(prec):
        thetas = [_theta(i, r, base) for i in range(half)]
        for bi in range(nb):
            for si in range(ns):
                m = int(pos[bi, si])
                cs = [(mpmath.cos(m * t), mpmath.sin(m * t)) for t in thetas]
                for h in range(nh):
                    row = [mpmath.mpf(float(v)) for v in x[bi, si, h]]
                    res = list(row)
                    for i, (c, s) in enumerate(cs):
                        j0, j1 = (i, i + half) if layout == "half" else (2 * i, 2 * i + 1)
                        a, b = row[j0], row[j1]
                        res[j0] = a * c - b * s
                        res[j1] = a * s + b * c
                    out[bi, si, h, :] = res
    return out


def ulp(value):
    """Unit in the last place of a float64 of magnitude |value| (value: mpf or float)."""
    v = abs(float(value))
    if v == 0.0:
        return 2.0**-1074
    return math.ldexp(1.0, math.frexp(v)[1] - 53)


def ulp_error(computed, exact):
    """|computed - exact| / ulp(exact), elementwise, for float64 array vs nested mpf lists."""
    return _scaled_error(computed, exact, ulp)


def abs_error(computed, exact):
    """|computed - exact| elementwise as float64, for float64 array vs nested mpf lists."""
    return _scaled_error(computed, exact, lambda e: 1.0)


def _scaled_error(computed, exact, scale):
    """|computed - exact| / scale(exact) elementwise, the difference taken at PREC_BITS."""
    comp = np.asarray(computed, dtype=np.float64)
    ex = np.asarray(exact, dtype=object).reshape(comp.shape)
    err = np.empty(comp.shape, dtype=np.float64)
    with mpmath.workprec(PREC_BITS):
        for idx in np.ndindex(comp.shape):
            e = ex[idx]
            err[idx] = float(abs(mpmath.mpf(float(comp[idx])) - e)) / scale(e)
    return err


def pair_ulp_error(computed, exact, x, rotary_dim=None, layout="half"):
    """Error of apply per element in ulps of its pair's input norm sqrt(a**2 + b**2).

    computed float64 [b, s, h, d], exact object array of mpf, x the float64 input. Tail
    elements are measured against ulp of their own exact value.
    """
    comp = np.asarray(computed, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[3]
    r = d if rotary_dim is None else rotary_dim
    half = r // 2
    if layout == "half":
        first, second = np.arange(half), np.arange(half) + half
    else:
        first, second = np.arange(0, r, 2), np.arange(1, r, 2)
    norm = np.zeros(x.shape)
    pn = np.hypot(x[..., first], x[..., second])
    norm[..., first] = pn
    norm[..., second] = pn
    err = np.empty(comp.shape, dtype=np.float64)
    with mpmath.workprec(PREC_BITS):
        for idx in np.ndindex(comp.shape):
            e = exact[idx]
            scale = ulp(norm[idx]) if idx[3] < r else ulp(e)
            err[idx] = float(abs(mpmath.mpf(float(comp[idx])) - e)) / scale
    return err
