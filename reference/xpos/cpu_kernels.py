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


# ---- golden mode's amplitudes (issue 31) --------------------------------------------------------
#
# Golden mode's quick phase (reference/numerics/stream_kernels.py) takes the scale as
# s = 2^fe (fh + fl), 1 <= fh < 2, within GOLDEN_REL_ERR relative. Steps 1-3 above give
# t = th + tl = e ln zeta_i within 2^-98 |t|; then
# 4'. t = k ln 2 + r, k = rint(th / ln 2): ln 2 = LN2_A + LN2_B + LN2_C (mpmath, LN2_A with 32
#    significant bits, so k LN2_A is exact for |k| < 2^21, and th - k LN2_A is exact by Sterbenz's
#    lemma), k LN2_B by TwoProduct, k LN2_C in double: r = rh + rl, |r| <= ln 2 / 2 + tiny, error
#    below 2^-100 absolute;
# 5'. r = j / 32 + u, j = rint(32 rh), |u| <= 1/64 + tiny (rh - j/32 exact, Sterbenz again);
#    exp(u) = 1 + u + u^2/2 + u^3/6 + u^4/24 + p, the first terms by Horner in double-double
#    (each step a dd_mul, relative error below 2^-104, and an addition of a double-double
#    coefficient), p = sum_{n=5..13} u^n / n! in double (p <= 2^-37, so its rounding and the
#    dropped u_lo terms stay below 2^-88; the truncation after n = 13 below 2^-110);
#    exp(j/32) a double-double from mpmath (2^-106); their dd_mul (2^-104); then normalised so that
#    fh is in [1, 2).
# Relative error: t's 2^-98 |t| (|t| <= T_GOLDEN = 690: 2^-88.6) plus the rest (< 2^-87.5 in all);
# GOLDEN_REL_ERR = 2^-86 is the bound handed to the kernel. Entries with |th| > T_GOLDEN (the scale
# near or past the ends of the double range, where fd, the nearest double, matters for non-finite
# inputs) or a non-finite intermediate are flagged: the caller evaluates them in mpmath.
GOLDEN_REL_ERR = 2.0**-86
T_GOLDEN = 690.0


def _golden_constants():
    import mpmath

    with mpmath.workprec(300):
        ln2 = mpmath.log(2)
        with mpmath.workprec(32):
            a = +ln2
        b = float(ln2 - a)
        c = float(ln2 - a - mpmath.mpf(b))
        tab = []
        for j in range(-12, 13):
            v = mpmath.exp(mpmath.mpf(j) / 32)
            hi = float(v)
            tab.append((hi, float(v - mpmath.mpf(hi))))
        inv = []
        for n in range(1, 5):
            v = 1 / mpmath.factorial(n)
            hi = float(v)
            inv.append((hi, float(v - mpmath.mpf(hi))))
    exp_tab = np.array(tab)
    return float(a), b, c, exp_tab, np.array(inv), np.array([1.0 / math.factorial(n) for n in range(14)])


_LN2_A, _LN2_B, _LN2_C, _EXP_TAB, _INV_FACT_DD, _INV_FACT = _golden_constants()


@numba.njit(inline="always", fastmath=False)
def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@numba.njit(inline="always", fastmath=False)
def _dd_mul(ah, al, bh, bl):
    """(ah + al)(bh + bl) renormalised, relative error below 2^-104 (Dekker)."""
    p, e = _two_product(ah, bh)
    e = e + (ah * bl + al * bh)
    s = p + e
    return s, e - (s - p)


@numba.njit(inline="always", fastmath=False)
def _dd_add(ah, al, bh, bl):
    s, e = _two_sum(ah, bh)
    t, f = _two_sum(al, bl)
    e = e + t
    h = s + e
    e = e - (h - s)
    e = e + f
    s = h + e
    return s, e - (s - h)


@numba.njit(cache=True, fastmath=False, parallel=True)
def golden_scale_kernel(positions, centre, scale_base, sign, log_hi, log_lo, ln2, exp_tab, inv_dd, inv, out,
                        flags):
    """out[t, i] = (fh, fl, fe, fd) of zeta_i^(sign (positions[t] - centre) / scale_base) within
    GOLDEN_REL_ERR (see above); flags[t, i] = 1 where the caller must evaluate it in mpmath.
    Positions in parallel (Numba's pool; one thread below PARALLEL_MIN_WORK, see golden_scales)."""
    for t in numba.prange(positions.shape[0]):
        a = float(positions[t])
        b = -centre
        s1 = a + b
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
            th = h + l
            tl = l - (th - h)
            if not (abs(th) <= T_GOLDEN) or not math.isfinite(tl):
                flags[t, i] = 1
                continue
            k = np.rint(th / ln2[3])
            p, pe = _two_product(k, ln2[1])
            rh, re = _two_sum(th - k * ln2[0], -p)
            rl = ((re - pe) + tl) - k * ln2[2]
            rh, rl = _two_sum(rh, rl)
            j = np.rint(rh * 32.0)
            uh, ul = _two_sum(rh - j / 32.0, rl)
            q = inv[13]  # Q(u) = sum_{n=5..13} u^(n-5) / n!, in double
            for n in range(12, 4, -1):
                q = q * uh + inv[n]
            # Horner in double-double: exp(u) = 1 + u (1 + u (1/2 + u (1/6 + u (1/24 + u Q))))
            ch, cl = _dd_add(inv_dd[3, 0], inv_dd[3, 1], uh * q, 0.0)
            for n in range(2, -1, -1):
                ch, cl = _dd_mul(ch, cl, uh, ul)
                ch, cl = _dd_add(ch, cl, inv_dd[n, 0], inv_dd[n, 1])
            ch, cl = _dd_mul(ch, cl, uh, ul)
            ch, cl = _dd_add(ch, cl, 1.0, 0.0)
            jj = np.int64(j) + 12
            vh, vl = _dd_mul(ch, cl, exp_tab[jj, 0], exp_tab[jj, 1])
            fe = k
            if vh < 1.0:
                vh *= 2.0
                vl *= 2.0
                fe -= 1.0
            out[t, i, 0] = vh
            out[t, i, 1] = vl
            out[t, i, 2] = fe
            out[t, i, 3] = math.ldexp(vh + vl, np.int64(fe))


def golden_scales(positions, centre, scale_base, sign, log_hi, log_lo):
    """(out float64 [n, P, 4], flags uint8 [n, P]) for int64 positions [n] (golden_scale_kernel)."""
    pos = np.ascontiguousarray(positions, dtype=np.int64)
    out = np.zeros((pos.shape[0], log_hi.shape[0], 4))
    flags = np.zeros(out.shape[:2], dtype=np.uint8)
    ln2 = np.array([_LN2_A, _LN2_B, _LN2_C, _LN2_A + _LN2_B])
    from reference.numerics.cpu_kernels import run_kernel

    # about 64 operations per scale: on the pool from 2^16 scales (run_kernel's PARALLEL_MIN_WORK)
    run_kernel(golden_scale_kernel, 64 * out.shape[0] * out.shape[1], pos, float(centre), float(scale_base),
               float(sign), log_hi, log_lo, ln2, _EXP_TAB, _INV_FACT_DD, _INV_FACT, out, flags)
    return out, flags
