"""mpmath oracle for RoPE: cos/sin and apply at high precision, for sampled cases.

Everything is recomputed from scratch in mpmath (theta_i = base**(-2i/r) with base and the
inputs taken exactly from their float64 values); nothing here shares code with the float64
reference. Default precision: 200 bits, enough for |m| up to 2**60 with > 100 correct bits.

Also the error measures the tests use: ``ulp_error`` (error in units of the last place of the
exact value) and ``pair_ulp_error`` for apply outputs (error in ulps of the pair's norm, since
a rotated coordinate can cancel to near zero while its absolute error stays ~ulp(|pair|)).

For golden mode: ``nearest_double`` (from reference.golden.certify: exact round-to-nearest-even
of an mpf to float64), ``cos_sin_nearest`` / ``apply_nearest`` (the correctly rounded
results, precision raised until the rounding is certain) and ``near_zero_positions`` (positions
where m * theta_i comes closest to a multiple of pi/2: the convergents of 2 theta_i / pi).
"""

import functools
import math

import mpmath
import numpy as np

from reference.golden.certify import nearest_double
from reference.numerics.rotation_oracle import (PREC_BITS, apply_exact, cos_sin_exact,  # noqa: F401  (the oracle API)
                                              frequencies_exact, theta_exact)


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


# ---- correctly rounded results (golden mode) ---------------------------------------------


def _nearest_settled(compute, prec=PREC_BITS):
    """Round each value of compute(prec) -> ([mpf values], mpf absolute error bound) to the
    nearest double, doubling prec (up to 8x) until both ends of every error interval round the
    same way. Returns a list of floats.

    Not reference.numerics.phase.settle on purpose: the oracle shares no code with the float64
    reference it certifies (tests/rope compares phase's golden values with this), it rounds with
    golden.certify.nearest_double rather than phase.to_double, and it settles several values
    under one bound from the caller's precision up."""
    out = []
    for p in (prec, 2 * prec, 4 * prec, 8 * prec):
        with mpmath.workprec(p + 16):
            values, err = compute(p)
            out = [nearest_double(v) for v in values]
            if all(nearest_double(v - err) == nearest_double(v + err) for v in values):
                return out
    return out


@functools.lru_cache(maxsize=4096)
def _theta_at(i, rotary_dim, base, prec):
    with mpmath.workprec(prec):
        return theta_exact(i, rotary_dim, base)


def _cs_at(m, i, rotary_dim, base, prec):
    """[cos, sin] of m theta_i at prec bits and an absolute error bound for both."""
    t = _theta_at(int(i), int(rotary_dim), float(base), int(prec))
    with mpmath.workprec(prec + 16):
        ang = m * t
        err = (abs(ang) + 1) * mpmath.mpf(2) ** (8 - prec)
        return [mpmath.cos(ang), mpmath.sin(ang)], err


def cos_sin_nearest(positions, rotary_dim, base=10000.0, prec=PREC_BITS, pairs=None):
    """The correctly rounded (cos, sin) of m theta_i: float64 arrays [n, len(pairs)] for
    positions [n] (pairs: the indices i to compute, default all r/2)."""
    pos = np.asarray(positions, dtype=np.int64).reshape(-1).tolist()
    idx = list(range(rotary_dim // 2)) if pairs is None else [int(i) for i in pairs]
    c = np.empty((len(pos), len(idx)))
    s = np.empty((len(pos), len(idx)))
    for t, m in enumerate(pos):
        for k, i in enumerate(idx):
            c[t, k], s[t, k] = _nearest_settled(
                lambda p, m=m, i=i: _cs_at(m, i, rotary_dim, base, p), prec
            )
    return c, s


def apply_nearest(x, positions, rotary_dim=None, base=10000.0, layout="half", prec=PREC_BITS):
    """The correctly rounded RoPE of x [b, s, h, d] (float64 inputs taken exactly): float64."""
    x = np.asarray(x, dtype=np.float64)
    nb, ns, nh, d = x.shape
    r = d if rotary_dim is None else rotary_dim
    half = r // 2
    pos = np.asarray(positions, dtype=np.int64)
    out = x.copy()
    for bi in range(nb):
        for si in range(ns):
            m = int(pos[bi, si])
            for i in range(half):
                j0, j1 = (i, i + half) if layout == "half" else (2 * i, 2 * i + 1)
                for h in range(nh):
                    a, b = float(x[bi, si, h, j0]), float(x[bi, si, h, j1])

                    def both(p, a=a, b=b, m=m, i=i):
                        (c, s), err = _cs_at(m, i, r, base, p)
                        return [a * c - b * s, a * s + b * c], (abs(a) + abs(b)) * err

                    out[bi, si, h, j0], out[bi, si, h, j1] = _nearest_settled(both, prec)
    return out


def near_zero_positions(theta, max_position=2**53, prec=400):
    """Positions 1 <= m <= max_position where m * theta is closest to a multiple of pi/2.

    theta: mpf (or float) frequency. Returns the denominators q_k of the continued-fraction
    convergents of 2 theta / pi (each q_k is a record: |q_k v - nint(q_k v)| is smaller than for
    every m < q_k), as Python ints, in increasing order.
    """
    out = []
    with mpmath.workprec(prec):
        v = 2 * mpmath.mpf(theta) / mpmath.pi
        q_prev, q = 0, 1  # q_(-1), q_0
        x = v
        while q <= max_position:
            out.append(q)
            frac = x - mpmath.floor(x)
            if frac == 0:
                break
            x = 1 / frac
            q_prev, q = q, int(mpmath.floor(x)) * q + q_prev
    return out
