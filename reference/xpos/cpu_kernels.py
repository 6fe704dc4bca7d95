"""Numba @njit kernel of xPos's fast scale s = zeta_i^e, e = sign (m - c) / B (backend "cpu";
never fastmath: every operation below is one IEEE double rounding, the error-free transforms rely
on it).

s = exp(t) with t = e ln zeta_i. The exponent |t| reaches hundreds (|m| up to 2^53), so t is
formed in double-double and only its leading part goes through libm:

1. m - c exactly: float(m) is exact (|m| <= 2^53), TwoSum(m, -c) = s1 + s2 (Knuth).
2. e = sign (s1 + s2) / B: e1 = fl(s1 / B), the remainder s1 - e1 B by Dekker's TwoProduct
   (exact), e2 = fl(((s1 - p1) - p2 + s2) / B); |e1 + e2 - e| <= 2^-100 |e| (double-double
   division by a double; s1 - p1 is exact by Sterbenz's lemma).
3. t = (e1 + e2)(L1 + L2), L1 + L2 = ln zeta_i to 2^-104 relative (mpmath, core.py): TwoProduct
   e1 L1 plus the cross terms, renormalised (FastTwoSum): th + tl, |th + tl - t| <= 2^-98 |t|.
4. y = exp(th) (libm, within E_exp ulp: glibc documents 0.511 ulp, i.e. a relative error below
   1.03 u with u = 2^-53), f = fl(y + fl(y tl)).

Error (first order; |tl| <= 2^-52 |th| < 2^-42 on the accepted range |th| <= T_MAX = 700):
exp(t) = exp(th)(1 + tl + r1)(1 + r2), |r1| <= tl^2 < 2^-84, |r2| <= 2^-98 |t| < 2^-88; the
product y tl adds u |tl| < 2^-95 relative, the final sum u. So |f / s - 1| <= 1.03 u + u + 2^-83
< 2.1 u. The documented (and tested) bound is REL_ERR = 4 u = 2^-51 (twice the derivation, for
libm's exp: the sampled maximum is in tests/xpos/test_xpos_fast.py). Entries with |th| > T_MAX
(s near overflow or in the subnormal range), or any non-finite intermediate (B so small that e
overflows), are flagged and computed by the caller in mpmath instead.
"""

import math

import numba
import numpy as np

REL_ERR = 2.0**-51
T_MAX = 700.0  # exp(+-700) is normal (the subnormal range starts below exp(-708.39))
_SPLIT = 134217729.0  # 2^27 + 1 (Dekker's splitting constant)


@numba.njit(cache=True, fastmath=False, inline="always")
def _two_product(a, b):
    """(p, q) with p = fl(a b) and p + q = a b exactly (Dekker; no over/underflow in the splits)."""
    p = a * b
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    q = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, q


@numba.njit(cache=True, fastmath=False)
def scale_kernel(positions, centre, scale_base, sign, log_hi, log_lo, out, flags):
    """out[t, i] = zeta_i^(sign (positions[t] - centre) / scale_base) within REL_ERR relative;
    flags[t, i] = 1 where the entry is outside the accepted range (out not written there).
    positions int64 [n] (|m| <= 2^53), log_hi + log_lo float64 [P] = ln zeta_i."""
    for t in range(positions.shape[0]):
        a = float(positions[t])
        b = -centre
        s1 = a + b  # TwoSum (Knuth): s1 + s2 = a + b exactly
        bb = s1 - a
        s2 = (a - (s1 - bb)) + (b - bb)
        e1 = s1 / scale_base
        p1, p2 = _two_product(e1, scale_base)
        e2 = (((s1 - p1) - p2) + s2) / scale_base
        e1 = sign * e1
        e2 = sign * e2
        for i in range(log_hi.shape[0]):
            h, l = _two_product(e1, log_hi[i])
            l = l + (e1 * log_lo[i] + e2 * log_hi[i])
            th = h + l  # FastTwoSum (|h| >= |l|)
            tl = l - (th - h)
            if not (abs(th) <= T_MAX) or not math.isfinite(tl):
                flags[t, i] = 1
                continue
            y = math.exp(th)
            out[t, i] = y + y * tl


def scales(positions, centre, scale_base, sign, log_hi, log_lo):
    """(out float64 [n, P], flags uint8 [n, P]) for int64 positions [n] (see scale_kernel)."""
    pos = np.ascontiguousarray(positions, dtype=np.int64)
    out = np.empty((pos.shape[0], log_hi.shape[0]))
    flags = np.zeros(out.shape, dtype=np.uint8)
    scale_kernel(pos, float(centre), float(scale_base), float(sign), log_hi, log_lo, out, flags)
    return out, flags
