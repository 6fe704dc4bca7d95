"""mpmath oracle for a rotation by a frequency table (RoPE's, reused by xPos, Gaussian RoPE and the
attention family): the exact cos/sin of m theta_i and the exact rotated pairs, at high precision.

Everything is recomputed from scratch in mpmath (theta_i = base**(-2i/r) with base and the inputs
taken exactly from their float64 values; a scaling's theta'_i and attention factor from
scaling_oracle.py); nothing here shares code with the float64 reference. Default precision: 200
bits, enough for |m| up to 2**60 with > 100 correct bits. The error measures and the correctly
rounded results built on this: reference/rope/oracle.py.
"""

import mpmath
import numpy as np

from . import scaling_oracle

PREC_BITS = 200


def theta_exact(i, rotary_dim, base):
    return mpmath.mpf(float(base)) ** (-(2 * mpmath.mpf(i)) / rotary_dim)


def frequencies_exact(rotary_dim, base, scaling, seq_len):
    """(theta'_i, attention factor) in mpf: the plain ladder, or scaling_oracle's formulas."""
    if scaling is None:
        return [theta_exact(i, rotary_dim, base) for i in range(rotary_dim // 2)], mpmath.mpf(1)
    return scaling_oracle.exact(scaling, rotary_dim, base, seq_len)


def cos_sin_exact(positions, rotary_dim, base=10000.0, prec=PREC_BITS, scaling=None, seq_len=None):
    """Exact-to-prec (cos, sin) of m theta_i as nested lists of mpf, [n][r/2] for positions [n]
    (times the attention factor of a scaling, as in rotation.cos_sin)."""
    with mpmath.workprec(prec):
        thetas, f = frequencies_exact(rotary_dim, base, scaling, seq_len)
        cos_rows, sin_rows = [], []
        for m in np.asarray(positions, dtype=np.int64).reshape(-1).tolist():
            cos_rows.append([f * mpmath.cos(m * t) for t in thetas])
            sin_rows.append([f * mpmath.sin(m * t) for t in thetas])
    return cos_rows, sin_rows


def apply_exact(x, positions, rotary_dim=None, base=10000.0, layout="half", prec=PREC_BITS,
                scaling=None, seq_len=None):
    """Exact RoPE of x [b, s, h, d] (float64 inputs taken exactly), as an object array of mpf
    (rotated pairs times the attention factor of a scaling, as in rotation.apply)."""
    x = np.asarray(x, dtype=np.float64)
    nb, ns, nh, d = x.shape
    r = d if rotary_dim is None else rotary_dim
    half = r // 2
    pos = np.asarray(positions, dtype=np.int64)
    out = np.empty(x.shape, dtype=object)
    with mpmath.workprec(prec):
        thetas, f = frequencies_exact(r, base, scaling, seq_len)
        for bi in range(nb):
            for si in range(ns):
                m = int(pos[bi, si])
                cs = [(f * mpmath.cos(m * t), f * mpmath.sin(m * t)) for t in thetas]
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
