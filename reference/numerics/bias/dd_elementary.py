"""Double-double log1p and exp for the golden quick phase of the bias families (ALiBi, KERPLE,
FIRE), and the rounding test they share. Numba, never fastmath; every function inlined so that
the kernels calling them hold no calls.

Error-free transformations are ddmath.py's (TwoSum, Dekker's TwoProduct, dd_mul; exact while no
product leaves [2**-969, 2**996]). A double-double (h, l) is normalised: h = fl(h + l).

``log1p_dd(wh, wl)`` = log(1 + w), w = wh + wl >= 0, wh < 2**1000. Reduction (all steps exact or
below 2**-106 relative): for w < 1, j = floor(64 w), c = 1 + j/64, 1 + w = c (1 + r) with
r = (w - j/64) / c (w - j/64 is exact by Sterbenz's lemma, then one double-double division); for
w >= 1, z = 1 + w = 2**k m with m in [1, 2) (exact scaling), j = floor(64 (m - 1)), r = (m - c)/c.
Then log(1 + w) = k ln 2 + log c_j + log1p(r), r in (-2**-52, 1/64), with
log1p(r) = 2 atanh(s), s = r / (2 + r), |s| < 2**-7, summed as 2 s sum_{n<=7} s**(2n) / (2n + 1)
(first omitted term below 2**-112 relative). ln 2 and log c_j are double-doubles from mpmath
(error below 2**-106 relative). All three terms are >= 0 (no cancellation), so the relative error
is below about 12 roundings of 2**-105 (the dd products, sums, two divisions, the constants):
< 2**-100. LOG1P_REL_ERR = 2**-96 leaves a factor 16.

``exp_dd(yh, yl)`` = exp(y), 0 <= y <= 700. y = k ln2/64 + r, k = round(64 y / ln 2),
r = (yh - k L1) + (yl - e - k L2) with ln2/64 = L1 + L2 (double-double) and k L1 = p + e by
TwoProduct (exact; yh - p exact by Sterbenz's lemma); |k| < 2**16, so |e|, |k L2| < 2**-43 and
the two roundings plus L1 + L2's own error (k 2**-113) leave r's absolute error below 2**-95.5;
|r| <= ln2/128 + 2**-90; exp(r) by its Taylor series to r**10/10! in double-double (first omitted
term below 2**-107 relative); exp(y) = 2**(k >> 6) 2**((k & 63)/64) exp(r), the last two a dd
product with a table from mpmath. Relative error below 2**-95 (measured worst 2**-96.6 on 500
random y in [0, 700], tests/kerple/test_kerple_golden.py); EXP_REL_ERR = 2**-92.

``round_test(h, l, err)``: (fl(h + l), certain): Ziv's rounding test (cpu_kernels._round_certain,
RoPE's golden quick phase), also certain where err == 0 (the double-double is the exact value,
and fl(h + l) is its correct rounding by IEEE 754).
"""

from __future__ import annotations

import hashlib
import math
import pathlib

import mpmath
import numba
import numpy as np

from reference.numerics import ddmath
from reference.numerics.cpu_kernels import _round_certain

# Numba's on-disk cache keys a kernel on its own file only: the kernels calling these inlined
# functions close over this digest (as cpu_kernels._build does), so that an edit here, in ddmath.py
# or in cpu_kernels.py never loads stale machine code.
SOURCE_DIGEST = hashlib.sha256(b"".join(
    pathlib.Path(f).read_bytes() for f in (__file__, ddmath.__file__, ddmath.__file__.replace("ddmath.py", "cpu_kernels.py"))
)).hexdigest()
LOG1P_REL_ERR = 2.0**-96
EXP_REL_ERR = 2.0**-92
LOG1P_MAX = 2.0**1000  # log1p_dd's domain: 0 <= w < LOG1P_MAX
EXP_MAX = 700.0  # exp_dd's domain: 0 <= y <= EXP_MAX

_inline = numba.njit(fastmath=False, inline="always")


@_inline
def _mul(a, b):
    return a * b


_dd = ddmath.jit_family(_inline, _mul)
two_sum = _dd.two_sum
fast_two_sum = _dd.fast_two_sum
two_prod = _dd.two_prod
dd_mul = _dd.dd_mul
dd_add = _dd.dd_add


def _pair(x):
    hi = float(x)
    return hi, float(x - mpmath.mpf(hi))


def _tables():
    with mpmath.workprec(320):
        ln2 = _pair(mpmath.log(2))
        ln2_64 = _pair(mpmath.log(2) / 64)
        log_c = [_pair(mpmath.log(1 + mpmath.mpf(j) / 64)) for j in range(65)]
        exp2 = [_pair(mpmath.power(2, mpmath.mpf(j) / 64)) for j in range(64)]
        atanh_c = [_pair(mpmath.mpf(1) / (2 * n + 1)) for n in range(8)]
        exp_c = [_pair(1 / mpmath.factorial(n)) for n in range(11)]

    def arr(pairs):
        out = np.array(pairs, dtype=np.float64).T.copy()
        out.setflags(write=False)
        return out

    return ln2, ln2_64, arr(log_c), arr(exp2), arr(atanh_c), arr(exp_c)


(_LN2_H, _LN2_L), (_L1, _L2), _LOG_C, _EXP2, _ATANH_C, _EXP_C = _tables()


@_inline
def dd_div_d(ah, al, b):
    """(ah + al) / b for a double b != 0, a normalised double-double (relative error < 2**-104)."""
    q = ah / b
    p, e = two_prod(q, b)
    r = ((ah - p) - e + al) / b
    return fast_two_sum(q, r)


@_inline
def dd_div(ah, al, bh, bl):
    """(ah + al) / (bh + bl), normalised (relative error < 2**-103)."""
    q = ah / bh
    p, e = two_prod(q, bh)
    r = ((ah - p) - e + al - q * bl) / (bh + bl)
    return fast_two_sum(q, r)


@_inline
def _log1p_small(rh, rl):
    """log1p(r) for r in (-2**-52, 1/64): 2 atanh(r / (2 + r)) by its series (module docstring)."""
    th, tl = fast_two_sum(2.0, rh)
    tl += rl
    sh, sl = dd_div(rh, rl, th, tl)
    zh, zl = dd_mul(sh, sl, sh, sl)
    ph = _ATANH_C[0, 7]
    pl = _ATANH_C[1, 7]
    for n in range(6, -1, -1):
        ph, pl = dd_mul(ph, pl, zh, zl)
        ph, pl = dd_add(ph, pl, _ATANH_C[0, n], _ATANH_C[1, n])
    ph, pl = dd_mul(ph, pl, sh, sl)
    return 2.0 * ph, 2.0 * pl


@_inline
def log1p_dd(wh, wl):
    """log(1 + w) as a double-double, w = wh + wl in [0, LOG1P_MAX) (module docstring)."""
    k = 0
    if wh < 1.0:
        j = int(wh * 64.0)
        nh, nl = two_sum(wh - j * 0.015625, wl)
    else:
        zh, zl = two_sum(1.0, wh)
        zh, zl = fast_two_sum(zh, zl + wl)
        _mant, k = math.frexp(zh)  # zh = mant 2**k, mant in [1/2, 1)
        k -= 1
        mh = math.ldexp(zh, -k)
        ml = math.ldexp(zl, -k)
        j = int((mh - 1.0) * 64.0)
        nh, nl = two_sum(mh - (1.0 + j * 0.015625), ml)
    rh, rl = dd_div_d(nh, nl, 1.0 + j * 0.015625)
    lh, ll = _log1p_small(rh, rl)
    lh, ll = dd_add(lh, ll, _LOG_C[0, j], _LOG_C[1, j])
    if k != 0:
        p, e = two_prod(float(k), _LN2_H)
        lh, ll = dd_add(lh, ll, p, e + float(k) * _LN2_L)
    return lh, ll


@_inline
def exp_dd(yh, yl):
    """exp(y) as a double-double, y = yh + yl in [0, EXP_MAX] (module docstring)."""
    k = int(math.floor(yh * (64.0 / 0.6931471805599453) + 0.5))  # noqa: RUF046 (explicit for Numba's typing)
    p, e = two_prod(float(k), _L1)
    rh, rl = two_sum(yh - p, yl - e - float(k) * _L2)
    ph = _EXP_C[0, 10]
    pl = _EXP_C[1, 10]
    for n in range(9, -1, -1):
        ph, pl = dd_mul(ph, pl, rh, rl)
        ph, pl = dd_add(ph, pl, _EXP_C[0, n], _EXP_C[1, n])
    j = k & 63
    ph, pl = dd_mul(ph, pl, _EXP2[0, j], _EXP2[1, j])
    return math.ldexp(ph, k >> 6), math.ldexp(pl, k >> 6)


@_inline
def round_test(h, l, err):
    """(fl(h + l), certain) for the exact value within err >= 0 of h + l (module docstring)."""
    r, ok = _round_certain(h, l, err)
    return r, ok | (err == 0.0)
