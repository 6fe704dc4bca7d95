"""Numba @njit kernels for the phase m * theta on the CPU (backend "cpu"). Never fastmath.

Each kernel takes contiguous int64/uint64/float64 arrays only, so it compiles for one signature
(cached on disk: cache=True, keyed also on ddmath.py's source digest). ``limbs`` is a
FrequencyTable's uint64 [n, 1 + F] fixed-point 2 theta / pi (phase.py).

Two paths compute the phase (speed: docs/performance.md; accuracy: ACCURACY.md):
- positions 0 < |m| <= 2**21 (prefill, decode, cos/sin caches): a float reduction with exact
  products of 32-bit chunks of 2 theta / pi, then polynomials (fast mode: the fdlibm kernels;
  golden mode: a quick phase to ~2**-64 checked by Ziv's rounding test), all branch-free so that
  LLVM vectorises the loop over a token's pairs (see "the fast path" below);
- every other position, every table entry whose reduction could come too close to a zero, and
  every golden value the quick phase cannot certify: ddmath.py compiled with numba.njit (exact
  Payne-Hanek reduction with integers, double-double sin/cos; see its docstring).

The apply kernels read x and write a new array in one pass (the tail past rotary_dim is copied in
that pass, bit for bit); x is never written, so the caller need not copy it first. Small inputs
run with one thread (PARALLEL_MIN_WORK), large ones on Numba's thread pool.
"""

import hashlib
import pathlib

import numba
import numpy as np
from numba import prange

from . import ddmath


@numba.njit(inline="always", fastmath=False)
def _mul(a, b):
    return a * b


# Functions with array arguments are inlined at the Numba IR level (see ddmath.ARRAY_FUNCTIONS):
# that roughly halves the cost of the fast path.
dd = ddmath.jit_family(
    numba.njit(fastmath=False), _mul, array_decorator=numba.njit(fastmath=False, inline="always")
)
_rotate = dd.rotate
_sincos_golden = dd.sincos_golden
_round_sincos = dd.round_sincos
_rotate_golden = dd.rotate_golden
_MAX_LIMBS = ddmath.MAX_LIMBS


def pair_columns(i, half, layout):
    """(j0, j1): the columns of x holding pair i of the rotated r = 2 half; layout 0 = half
    (i, i + half), 1 = interleaved (2i, 2i + 1) (phase.py's layouts). Plain Python, compiled here
    with numba.njit and by cuda_kernels.py as a device function, so both backends pair alike."""
    if layout == 0:
        return i, i + half
    return 2 * i, 2 * i + 1


_pair_columns = numba.njit(fastmath=False, inline="always")(pair_columns)


# ---- the fast path for |m| <= 2**21 ---------------------------------------------------------
#
# For small positions the exact integer reduction is replaced by a float one that vectorises:
# v = 2 theta / pi (quarter turns per position, from the table's limbs) is split into chunks
# V0..V3 of at most 32 significant bits and a last chunk V4 (the rest rounded to a double), so
# that m * Vk is exact for |m| <= 2**21 (k <= 3). Each product's integer part is dropped exactly
# (p - rint(p)), the fractions are summed with error-free transformations, and only the last
# additions round: the reduced fraction phi (quarter turns, |phi| <= 1/2 + 2**-22) has an absolute
# error below 2**-102 (bound in _small_chunks' docstring). An entry is sent down this path only
# if the smallest |m v - nearest integer| over 1 <= |m| <= 2**21 (its gap, from the convergents of
# v) is at least 2**-38, so the relative error of phi stays below 2**-63 for every such m (the
# exact path is kept for the other entries and for |m| > 2**21). sin and cos of a = phi pi/2 are
# then evaluated by polynomials on the double-double a: the fdlibm kernels __kernel_sin and
# __kernel_cos (Sun Microsystems 1993, freely redistributable; minimax fits on |a| <= pi/4 with
# approximation errors below 2**-58 that take the tail a_lo into account), no libm call, so the
# loop over a token's pairs is branch-free and LLVM vectorises it.

SMALL_M = 2**21
_SMALL_MIN_GAP_LOG2 = -38
_S1 = -1.66666666666666324348e-01
_S2 = 8.33333333332248946124e-03
_S3 = -1.98412698298579493134e-04
_S4 = 2.75573137070700676789e-06
_S5 = -2.50507602534068634195e-08
_S6 = 1.58969099521155010221e-10
_C1 = 4.16666666666666019037e-02
_C2 = -1.38888888888741095749e-03
_C3 = 2.48015872894767294178e-05
_C4 = -2.75573143513906633035e-07
_C5 = 2.08757232129817482790e-09
_C6 = -1.13596475577881948265e-11
_PIO2_HI = ddmath.PIO2_HI
_PIO2_LO = ddmath.PIO2_LO
_reduced_angle = dd.reduced_angle
# The small path's error-free transformations, compiled inline (ddmath's code, IR-inlined here so
# that the loop over a token's pairs holds no calls and LLVM can vectorise it).
_inline = numba.njit(fastmath=False, inline="always")
_small = ddmath.jit_family(_inline, _mul)
_two_sum = _small.two_sum
_fast_two_sum = _small.fast_two_sum
_dd_mul = _small.dd_mul
_two_prod = _small.two_prod


@numba.njit(fastmath=False, inline="always")
def _kernel_sin(x, y):
    """sin(x + y), |x| <= pi/4 (+ tiny), y the tail of x (fdlibm k_sin.c, iy = 1)."""
    z = x * x
    w = z * z
    r = _S2 + z * (_S3 + z * _S4) + z * w * (_S5 + z * _S6)
    v = z * x
    return x - ((z * (0.5 * y - v * r) - y) - v * _S1)


@numba.njit(fastmath=False, inline="always")
def _kernel_cos(x, y):
    """cos(x + y), |x| <= pi/4 (+ tiny), y the tail of x (fdlibm k_cos.c)."""
    z = x * x
    w = z * z
    r = z * (_C1 + z * (_C2 + z * _C3)) + w * w * (_C4 + z * (_C5 + z * _C6))
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + (z * r - x * y))


@numba.njit(fastmath=False, inline="always")
def _sincos_quadrant(q, ah, al):
    """(sin, cos) of q pi/2 + a, a = ah + al, q an integer (any sign): selects, no branches."""
    qq = q & 3
    s0 = _kernel_sin(ah, al)
    c0 = _kernel_cos(ah, al)
    odd = (qq & 1) != 0
    s = c0 if odd else s0
    c = s0 if odd else c0
    s = -s if (qq & 2) != 0 else s
    c = -c if ((qq + 1) & 2) != 0 else c
    return s, c


@numba.njit(fastmath=False, inline="always")
def _reduce_small(mf, v0, v1, v2, v3, v4):
    """(q, a_hi, a_lo): m v = q + phi quarter turns (q an integer, any sign), a = phi pi/2 as a
    double-double, for |m| <= 2**21 (mf = float(m)); see _small_chunks for the error."""
    p0 = mf * v0
    n0 = np.rint(p0)
    p1 = mf * v1
    n1 = np.rint(p1)
    s, e = _two_sum(p0 - n0, p1 - n1)
    n2 = np.rint(s)
    h, l = _two_sum(s - n2, mf * v2)
    l = l + (e + (mf * v3 + mf * v4))
    h, l = _fast_two_sum(h, l)
    ah, al = _dd_mul(h, l, _PIO2_HI, _PIO2_LO)
    q = np.int64(n0) + np.int64(n1) + np.int64(n2)
    return q, ah, al


@numba.njit(fastmath=False, inline="always")
def _sincos_small(mf, v0, v1, v2, v3, v4):
    """(sin, cos) of m * theta for |m| <= 2**21 (mf = float(m)), v = v0 + ... + v4 quarter turns."""
    q, ah, al = _reduce_small(mf, v0, v1, v2, v3, v4)
    return _sincos_quadrant(q, ah, al)


# Golden mode's quick phase (|m| <= 2**21): sin and cos of a to about 2**-64 relative, each
# rounded once and kept only where that rounding is certain under QUICK_REL_ERR (Ziv's test, as
# ddmath.round_dd); the rest (about 2**-8 of the values) are recomputed by the double-double
# path of ddmath (the only path before), whose own uncertain values go to the host in mpmath.
# Error budget, relative to the result (|a| <= pi/4 + 2**-22, a = j/64 + u, |u| <= 1/128 + tiny,
# S_j, C_j the double-double table of ddmath): the reduction's absolute error < 2**-101 radians
# (counted separately, absolute, in QUICK_ABS_ERR); sin u = u (1 + c) with c evaluated in double
# (truncation < 2**-74, rounding < 2**-68 of u); cos u = 1 + d, d in double (< 2**-66); the
# combination S_j cos u + C_j sin u sums a head exactly (TwoProduct, TwoSum) and a tail below
# 2**-15 of the result in double (< 2**-65). Total below 2**-64; QUICK_REL_ERR = 2**-62 leaves 4x.
QUICK_REL_ERR = 2.0**-62
QUICK_ABS_ERR = 2.0**-100
_SIN_TAB_HI = ddmath.SIN_TAB_HI
_SIN_TAB_LO = ddmath.SIN_TAB_LO
_COS_TAB_HI = ddmath.COS_TAB_HI
_COS_TAB_LO = ddmath.COS_TAB_LO


@numba.njit(fastmath=False, inline="always")
def _sincos_quick(q, ah, al):
    """(s_hi, s_lo, c_hi, c_lo) of q pi/2 + a, about 2**-64 relative (see QUICK_REL_ERR)."""
    neg = ah < 0.0
    sg = -1.0 if neg else 1.0
    bh = ah * sg
    bl = al * sg
    j = np.int64(np.floor(bh * 64.0 + 0.5))
    j = min(max(j, np.int64(0)), np.int64(51))
    uh, ul = _two_sum(bh - float(j) * 0.015625, bl)
    z = uh * uh
    cs = z * (-0.16666666666666666 + z * (0.008333333333333333 + z * -0.0001984126984126984))
    # (the coefficients' own rounding, < 2**-53 relative, is inside c's budget)
    d = z * (-0.5 + z * (0.041666666666666664 + z * (-0.001388888888888889 + z * 2.48015873015873e-05))) - uh * ul
    su_tail = ul + uh * cs  # sin u = uh + su_tail
    sjh = _SIN_TAB_HI[j]
    sjl = _SIN_TAB_LO[j]
    cjh = _COS_TAB_HI[j]
    cjl = _COS_TAB_LO[j]
    p, e = _two_prod(cjh, uh)
    sh, e2 = _two_sum(sjh, p)
    sl = (sjl + e) + e2 + (cjh * su_tail + cjl * uh + sjh * d)
    p, e = _two_prod(sjh, uh)
    ch, e2 = _two_sum(cjh, -p)
    cl = (cjl - e) + e2 + (cjh * d - sjh * su_tail - sjl * uh)
    sh, sl = _fast_two_sum(sh, sl)
    ch, cl = _fast_two_sum(ch, cl)
    sh = sh * sg
    sl = sl * sg
    qq = q & 3
    odd = (qq & 1) != 0
    rsh = ch if odd else sh
    rsl = cl if odd else sl
    rch = sh if odd else ch
    rcl = sl if odd else cl
    ns = (qq & 2) != 0
    nc = ((qq + 1) & 2) != 0
    rsh = -rsh if ns else rsh
    rsl = -rsl if ns else rsl
    rch = -rch if nc else rch
    rcl = -rcl if nc else rcl
    return rsh, rsl, rch, rcl


_ETA = ddmath.ETA


@numba.njit(fastmath=False, inline="always")
def _round_certain(h, l, err):
    """ddmath.round_dd without branches (err > 0): (fl(h + l), certain). Selects only, so that
    the loop calling it vectorises; the same test, except that it never certifies err == 0."""
    r, d = _two_sum(h, l)
    ar = abs(r)
    d = -d if r < 0.0 else d
    eta = ar * _ETA
    up = (ar + eta) - ar
    down = ar - (ar - eta)
    gap = up if d >= 0.0 else down
    need = (abs(d) + err) * (1.0 + 2.0**-50)
    return r, need < gap * 0.5


@numba.njit(fastmath=False, inline="always")
def _row_golden(m, limbs, chunks, exact_rows, scratch, c_out, s_out, flags):
    """Golden cos/sin of m theta_i for every entry i: the quick phase where it applies and is
    certain, ddmath's double-double path elsewhere; flags as cos_sin_golden_kernel's."""
    count = limbs.shape[0]
    if m <= SMALL_M and m >= -SMALL_M and m != 0:
        mf = float(m)
        for i in range(count):
            q, ah, al = _reduce_small(mf, chunks[0, i], chunks[1, i], chunks[2, i], chunks[3, i], chunks[4, i])
            sh, sl, ch, cl = _sincos_quick(q, ah, al)
            s, ok_s = _round_certain(sh, sl, QUICK_ABS_ERR + abs(sh) * QUICK_REL_ERR)
            c, ok_c = _round_certain(ch, cl, QUICK_ABS_ERR + abs(ch) * QUICK_REL_ERR)
            c_out[i] = c
            s_out[i] = s
            flags[i] = 0 if (ok_s & ok_c) else 4
        for k in range(exact_rows.shape[0]):
            flags[exact_rows[k]] = 4
    else:
        for i in range(count):
            flags[i] = 4
    for i in range(count):  # one call site of the (inlined) double-double path
        if flags[i] == 4:
            sh, sl, ch, cl, exact = _sincos_golden(m, limbs, i, scratch)
            s, c, flag = _round_sincos(sh, sl, ch, cl, exact)
            c_out[i] = c
            s_out[i] = s
            flags[i] = flag


@numba.njit(fastmath=False, inline="always")
def _sincos_exact(m, limbs, row, scratch):
    """Fast-mode (sin, cos) for any accepted m: the exact integer reduction (ddmath), then the
    same polynomial kernels."""
    q, ah, al, negative, exact = _reduced_angle(m, limbs, row, scratch)
    s, c = _sincos_quadrant(np.int64(q), ah, al)
    return (-s if negative else s), c


@numba.njit(fastmath=False, inline="always")
def _row_fast(m, limbs, chunks, exact_rows, scratch, c_out, s_out):
    """c_out[i], s_out[i] = cos, sin of m theta_i for every entry i of the table (fast mode)."""
    count = limbs.shape[0]
    small = m <= SMALL_M and m >= -SMALL_M
    if small:
        mf = float(m)
        for i in range(count):
            s, c = _sincos_small(mf, chunks[0, i], chunks[1, i], chunks[2, i], chunks[3, i], chunks[4, i])
            c_out[i] = c
            s_out[i] = s
    # one call site for the exact path (it is inlined: a second one would double compile time)
    n_exact = exact_rows.shape[0] if small else count
    for k in range(n_exact):
        i = exact_rows[k] if small else k
        s, c = _sincos_exact(m, limbs, i, scratch)
        c_out[i] = c
        s_out[i] = s


def _gap(num, den, n_max):
    """min over 1 <= q <= n_max of |q num/den - nearest integer| (exact rationals, convergents)."""
    from fractions import Fraction

    v = Fraction(num, den)
    best = Fraction(1, 2)
    p0, q0, p1, q1 = 0, 1, 1, 0
    x = v
    while True:
        a = x.numerator // x.denominator
        p0, q0, p1, q1 = p1, q1, a * p1 + p0, a * q1 + q0
        if q1 > n_max:
            break
        qv = q1 * v
        best = min(best, abs(qv - round(qv)))
        frac = x - a
        if frac == 0:
            break
        x = 1 / frac
    return best


_small_cache: dict = {}


def _small_chunks(limbs):
    """(chunks float64 [5, n], exact_rows int64 [k]) for the |m| <= 2**21 path, cached per table.

    v_i = sum_j limbs[i, j] 2**(-32 j) exactly (a rational); V0..V3 are successive 32-bit
    pieces of it (each the nearest double with 32 significant bits to the rest), V4 the rest
    rounded to a double. Error of m v (|m| <= 2**21, in quarter turns): the stored v is short of
    the table's by < 2**(-32 F) <= 2**-224; V4's rounding and m V4's rounding are below
    2**(21 + 20 - 124 - 53 + 2) (each piece leaves a rest below 2**-31 of the one before); the
    three final additions in _sincos_small round values below 2**-52 (at most 2**-105 each).
    Total < 2**-102. Rows whose gap over |m| <= 2**21 is below 2**-38 are listed in exact_rows
    and take the exact path.
    """
    key = limbs.tobytes() + bytes([limbs.shape[1]])
    hit = _small_cache.get(key)
    if hit is not None:
        return hit
    from fractions import Fraction

    n, width = limbs.shape
    frac = width - 1
    den = 1 << (32 * frac)
    chunks = np.zeros((5, n), dtype=np.float64)
    exact = []
    for i in range(n):
        num = 0
        for j in range(width):
            num = (num << 32) | int(limbs[i, j])
        rest = Fraction(num, den)
        for k in range(4):
            if rest == 0:
                break
            e = rest.numerator.bit_length() - rest.denominator.bit_length()
            # e is floor(log2 rest) or one more: either way the piece has <= 32 significant bits
            unit = Fraction(2) ** (e - 31)
            piece = Fraction(round(rest / unit)) * unit
            value = float(piece)
            assert Fraction(value) == piece
            chunks[k, i] = value
            rest -= piece
        chunks[4, i] = float(rest)
        if _gap(num, den, SMALL_M) < Fraction(1, 2**-_SMALL_MIN_GAP_LOG2):
            exact.append(i)
    out = (chunks, np.array(exact, dtype=np.int64))
    _small_cache[key] = out
    return out


@numba.njit(fastmath=False, inline="always")
def _token_fast(x, out, bi, si, m, limbs, chunks, exact_rows, layout, scratch, cs, sn):
    """One token of fast apply: its r/2 cos/sin values once, then every head, x -> out.

    The pair loops are split by layout and read x, write out (never the same array), so LLVM
    can vectorise them; the tail past rotary_dim is copied in the same pass.
    """
    half = limbs.shape[0]
    _row_fast(m, limbs, chunks, exact_rows, scratch, cs, sn)
    nh = x.shape[2]
    d = x.shape[3]
    for h in range(nh):
        if layout == 0:
            for i in range(half):
                a = x[bi, si, h, i]
                b = x[bi, si, h, i + half]
                out[bi, si, h, i] = _mul(a, cs[i]) - _mul(b, sn[i])
                out[bi, si, h, i + half] = _mul(a, sn[i]) + _mul(b, cs[i])
        else:
            for i in range(half):
                a = x[bi, si, h, 2 * i]
                b = x[bi, si, h, 2 * i + 1]
                out[bi, si, h, 2 * i] = _mul(a, cs[i]) - _mul(b, sn[i])
                out[bi, si, h, 2 * i + 1] = _mul(a, sn[i]) + _mul(b, cs[i])
        for j in range(2 * half, d):
            out[bi, si, h, j] = x[bi, si, h, j]


_dot2_dd = _small.dot2_dd
_APPLY_REL_ERR = ddmath.APPLY_REL_ERR
_APPLY_MIN_ABS = ddmath.APPLY_MIN_ABS
_APPLY_MAX_ABS = ddmath.APPLY_MAX_ABS


@numba.njit(fastmath=False, inline="always")
def _rotate_quick(a, b, sh, sl, ch, cl):
    """As ddmath.rotate_golden with the quick phase's cos/sin (QUICK_REL_ERR, QUICK_ABS_ERR):
    (o0, o1, certain), branch-free. Each output's error bound adds (|a| + |b|) QUICK_ABS_ERR and
    (|a c| + |b s|) QUICK_REL_ERR to rotate_golden's; non-finite or out-of-range inputs are
    reported uncertain (the exact path handles them)."""
    aa = abs(a)
    ab = abs(b)
    in_range = ((aa == 0.0) | ((aa >= _APPLY_MIN_ABS) & (aa <= _APPLY_MAX_ABS))) & (
        (ab == 0.0) | ((ab >= _APPLY_MIN_ABS) & (ab <= _APPLY_MAX_ABS))
    )
    h0, l0 = _dot2_dd(a, ch, cl, -b, sh, sl)
    h1, l1 = _dot2_dd(a, sh, sl, b, ch, cl)
    extra = (aa + ab) * QUICK_ABS_ERR
    rel = _APPLY_REL_ERR + QUICK_REL_ERR
    err0 = (aa * abs(ch) + ab * abs(sh)) * rel + extra
    err1 = (aa * abs(sh) + ab * abs(ch)) * rel + extra
    o0, ok0 = _round_certain(h0, l0, err0)
    o1, ok1 = _round_certain(h1, l1, err1)
    return o0, o1, ok0 & ok1 & in_range


@numba.njit(fastmath=False, inline="always")
def _token_golden(x, out, bi, si, m, limbs, chunks, layout, scratch, tab, flags):
    """One token of golden apply, x -> out; flags[bi, si, h, i] = 1 where the pair needs the
    exact host path.

    For 0 < |m| <= 2**21 every pair is first rotated with the quick phase's cos/sin (a
    branch-free loop) and kept where its rounding is certain under the wider error bound; the
    other pairs, and every pair at other positions, use ddmath's double-double cos/sin (the
    only path before), computed for an entry only when some pair needs it (tab[4, i] = 1 once
    tab holds them)."""
    half = limbs.shape[0]
    nh = x.shape[2]
    d = x.shape[3]
    quick = m <= SMALL_M and m >= -SMALL_M and m != 0
    if quick:
        mf = float(m)
        for i in range(half):
            q, ah, al = _reduce_small(mf, chunks[0, i], chunks[1, i], chunks[2, i], chunks[3, i], chunks[4, i])
            sh, sl, ch, cl = _sincos_quick(q, ah, al)
            tab[0, i] = sh
            tab[1, i] = sl
            tab[2, i] = ch
            tab[3, i] = cl
            tab[4, i] = 0.0
        for h in range(nh):
            if layout == 0:
                for i in range(half):
                    o0, o1, ok = _rotate_quick(x[bi, si, h, i], x[bi, si, h, i + half],
                                               tab[0, i], tab[1, i], tab[2, i], tab[3, i])
                    out[bi, si, h, i] = o0
                    out[bi, si, h, i + half] = o1
                    flags[bi, si, h, i] = 0 if ok else 2
            else:
                for i in range(half):
                    o0, o1, ok = _rotate_quick(x[bi, si, h, 2 * i], x[bi, si, h, 2 * i + 1],
                                               tab[0, i], tab[1, i], tab[2, i], tab[3, i])
                    out[bi, si, h, 2 * i] = o0
                    out[bi, si, h, 2 * i + 1] = o1
                    flags[bi, si, h, i] = 0 if ok else 2
    else:
        for i in range(half):
            tab[4, i] = 0.0
    for h in range(nh):
        for i in range(half):
            if quick and flags[bi, si, h, i] != 2:
                continue
            if tab[4, i] != 1.0:  # one call site of the (inlined) double-double path
                sh, sl, ch, cl, _ = _sincos_golden(m, limbs, i, scratch)
                tab[0, i] = sh
                tab[1, i] = sl
                tab[2, i] = ch
                tab[3, i] = cl
                tab[4, i] = 1.0
            j0, j1 = _pair_columns(i, half, layout)
            o0, o1, ok = _rotate_golden(x[bi, si, h, j0], x[bi, si, h, j1], tab[0, i], tab[1, i], tab[2, i], tab[3, i])
            out[bi, si, h, j0] = o0
            out[bi, si, h, j1] = o1
            flags[bi, si, h, i] = 0 if ok else 1
        for j in range(2 * half, d):
            out[bi, si, h, j] = x[bi, si, h, j]


def _build(ddmath_digest):
    """Define the kernels as closures over ddmath.py's source digest.

    Numba's on-disk cache keys an entry on the kernel's own bytecode, its closure values and
    the mtime of *this* file only; without the digest, an edit to ddmath.py would silently
    load stale machine code.
    """

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def cos_sin_fast_kernel(positions, limbs, chunks, exact_rows, cos_out, sin_out):
        """cos_out[t, i], sin_out[t, i] = cos, sin of positions[t] * theta_i (fast mode).

        positions int64[::1] (n), limbs uint64[:, ::1] (count, 1 + F), chunks and exact_rows
        from _small_chunks(limbs), outputs float64[:, ::1].
        """
        _digest = ddmath_digest  # noqa: F841  (see _build)
        for t in prange(positions.shape[0]):
            scratch = np.empty(_MAX_LIMBS, dtype=np.uint64)
            _row_fast(positions[t], limbs, chunks, exact_rows, scratch, cos_out[t], sin_out[t])

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def cos_sin_golden_kernel(positions, limbs, chunks, exact_rows, cos_out, sin_out, flags):
        """As cos_sin_fast_kernel, each value rounded once from a double-double (golden mode).

        flags uint8[:, ::1]: bit 0 (cos) / bit 1 (sin) set where the rounding is not certain.
        """
        _digest = ddmath_digest  # noqa: F841  (see _build)
        for t in prange(positions.shape[0]):
            scratch = np.empty(_MAX_LIMBS, dtype=np.uint64)
            _row_golden(positions[t], limbs, chunks, exact_rows, scratch, cos_out[t], sin_out[t], flags[t])

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def apply_fast_kernel(x, out, positions, limbs, chunks, exact_rows, layout):
        """out = x with the pairs of every token rotated; layout 0 = half, 1 = interleaved.

        x, out float64[:, :, :, ::1] C-contiguous [b, s, h, d] (distinct arrays), positions
        int64[:, ::1] [b, s]. One pass: x is read once and out written once.
        """
        _digest = ddmath_digest  # noqa: F841  (see _build)
        nb, ns = positions.shape
        half = limbs.shape[0]
        # one token per step: its r/2 cos/sin values are computed once for all heads
        for bs in prange(nb * ns):
            bi = bs // ns
            si = bs % ns
            scratch = np.empty(_MAX_LIMBS, dtype=np.uint64)
            cs = np.empty(half)
            sn = np.empty(half)
            _token_fast(x, out, bi, si, positions[bi, si], limbs, chunks, exact_rows, layout, scratch, cs, sn)

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def apply_golden_kernel(x, out, positions, limbs, chunks, layout, flags):
        """Golden apply x -> out: each output the double-double a c - b s (a s + b c) rounded
        once. flags uint8[:, :, :, ::1] [b, s, h, r/2]: 1 where the pair needs the exact path."""
        _digest = ddmath_digest  # noqa: F841  (see _build)
        nb, ns = positions.shape
        half = limbs.shape[0]
        for bs in prange(nb * ns):
            bi = bs // ns
            si = bs % ns
            scratch = np.empty(_MAX_LIMBS, dtype=np.uint64)
            tab = np.empty((5, half))
            _token_golden(x, out, bi, si, positions[bi, si], limbs, chunks, layout, scratch, tab, flags)

    return cos_sin_fast_kernel, cos_sin_golden_kernel, apply_fast_kernel, apply_golden_kernel


_DIGEST = hashlib.sha256(pathlib.Path(ddmath.__file__).read_bytes()).hexdigest()
cos_sin_fast_kernel, cos_sin_golden_kernel, apply_fast_kernel, apply_golden_kernel = _build(_DIGEST)
KERNELS = (cos_sin_fast_kernel, cos_sin_golden_kernel, apply_fast_kernel, apply_golden_kernel)

# Below this much work (values written, plus 16 per cos/sin pair computed), a kernel runs with
# one thread (numba.set_num_threads(1) around the call, thread-local): the parallel region then
# never waits for a worker. It must wait for every worker to be scheduled otherwise: on a
# machine whose cores are busy (other processes, or torch's OpenMP pool spinning after each op
# in the same process) that wait is up to a scheduler time slice, milliseconds, while a decode
# step's whole work is ~100 us on one core. Above it the pool's speed-up (up to the core count)
# outweighs such a stall. Measured in docs/performance.md.
PARALLEL_MIN_WORK = 1 << 22


def run_kernel(kernel, work, *args):
    """kernel(*args), on one thread when ``work`` is below PARALLEL_MIN_WORK (stream_kernels.py's
    rotation too)."""
    if work >= PARALLEL_MIN_WORK:
        return kernel(*args)
    threads = numba.get_num_threads()
    if threads == 1:
        return kernel(*args)
    numba.set_num_threads(1)
    try:
        return kernel(*args)
    finally:
        numba.set_num_threads(threads)


def _pos(positions):
    return np.ascontiguousarray(positions, dtype=np.int64)


def _limbs(limbs):
    return np.ascontiguousarray(limbs, dtype=np.uint64)


def _cos_sin(kernel, cost, positions, limbs, golden):
    """(cos, sin) float64 [n, count] of positions int64 [n], and flags uint8 [n, count] when
    ``golden``, computed by ``kernel``; ``cost``: work per value (PARALLEL_MIN_WORK)."""
    n, count = positions.shape[0], limbs.shape[0]
    out = (np.empty((n, count), dtype=np.float64), np.empty((n, count), dtype=np.float64))
    if golden:
        out += (np.zeros((n, count), dtype=np.uint8),)
    limbs = _limbs(limbs)
    chunks, exact_rows = _small_chunks(limbs)
    run_kernel(kernel, cost * n * count, _pos(positions), limbs, chunks, exact_rows, *out)
    return out


def cos_sin_fast(positions, limbs):
    """Host wrapper: positions int64 [n] -> (cos, sin) float64 [n, count]."""
    return _cos_sin(cos_sin_fast_kernel, 16, positions, limbs, False)


def cos_sin_golden(positions, limbs):
    """Host wrapper: positions int64 [n] -> (cos, sin, flags) [n, count] (golden mode)."""
    return _cos_sin(cos_sin_golden_kernel, 64, positions, limbs, True)


def _x(x):
    return np.ascontiguousarray(x, dtype=np.float64)


def apply_fast(x, positions, limbs, layout):
    """Host wrapper: x (float64 [b, s, h, d]) rotated into a new array, which it returns.

    x is only read (a C-contiguous float64 x is used as is, without a copy)."""
    x = _x(x)
    out = np.empty_like(x)
    if x.size == 0:
        return out
    pos = _pos(positions)
    limbs = _limbs(limbs)
    chunks, exact_rows = _small_chunks(limbs)
    work = x.size + 16 * pos.size * limbs.shape[0]
    run_kernel(apply_fast_kernel, work, x, out, pos, limbs, chunks, exact_rows, np.int64(layout))
    return out


def apply_golden(x, positions, limbs, layout):
    """Host wrapper: golden rotation of x into a new array; returns (out, flags [b, s, h, count]).

    x is only read."""
    x = _x(x)
    nb, ns, nh, _ = x.shape
    out = np.empty_like(x)
    flags = np.zeros((nb, ns, nh, limbs.shape[0]), dtype=np.uint8)
    if x.size == 0:
        return out, flags
    pos = _pos(positions)
    limbs = _limbs(limbs)
    chunks, _ = _small_chunks(limbs)
    work = 4 * x.size + 64 * pos.size * limbs.shape[0]
    run_kernel(apply_golden_kernel, work, x, out, pos, limbs, chunks, np.int64(layout), flags)
    return out, flags


# ---- cos/sin written straight into a table's columns (sinusoidal tables, issue 31) ----------
# The sinusoidal family's table interleaves or concatenates sin and cos columns. Computing cos and
# sin into arrays of their own and then arranging them costs a second pass over the output; these
# kernels compute each position's row into a small per-row buffer (the same _row_fast /
# _row_golden as the kernels above, so the values are bit for bit theirs) and store it into the
# output's columns: out[t, s0 + i * ds] = sin, i < ns; out[t, c0 + i * dc] = cos, i < nc.


def _build_columns(ddmath_digest):
    """The column kernels, closures over ddmath.py's digest (see _build)."""

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def cos_sin_columns_kernel(positions, limbs, chunks, exact_rows, out, cols, golden, flags):
        """out float64[:, ::1] [n, d]; cols int64 [6] = (s0, ds, ns, c0, dc, nc); golden mode
        where ``golden`` (flags uint8 [n, count] as cos_sin_golden_kernel's), fast otherwise."""
        _digest = ddmath_digest  # noqa: F841  (see _build)
        count = limbs.shape[0]
        s0, ds, ns, c0, dc, nc = cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]
        both = min(ns, nc)
        for t in prange(positions.shape[0]):
            scratch = np.empty(_MAX_LIMBS, dtype=np.uint64)
            cs = np.empty(count)
            sn = np.empty(count)
            if golden:
                _row_golden(positions[t], limbs, chunks, exact_rows, scratch, cs, sn, flags[t])
            else:
                _row_fast(positions[t], limbs, chunks, exact_rows, scratch, cs, sn)
            row = out[t]
            # sin and cos of a frequency stored together: one sweep over the row (interleaved:
            # adjacent columns), then the unpaired tail (an odd interleaved width's last sine)
            for i in range(both):
                row[s0 + i * ds] = sn[i]
                row[c0 + i * dc] = cs[i]
            for i in range(both, ns):
                row[s0 + i * ds] = sn[i]
            for i in range(both, nc):
                row[c0 + i * dc] = cs[i]

    return cos_sin_columns_kernel


cos_sin_columns_kernel = _build_columns(_DIGEST)


def cos_sin_columns(positions, limbs, out, cols, golden):
    """Host wrapper: cos/sin of positions int64 [n] stored into out [n, d]'s columns (cols as the
    kernel's); returns the flags uint8 [n, count] (zeros in fast mode)."""
    pos = _pos(positions)
    limbs = _limbs(limbs)
    count = limbs.shape[0]
    flags = np.zeros((pos.shape[0], count) if golden else (0, 0), dtype=np.uint8)
    if pos.shape[0] == 0:
        return flags
    chunks, exact_rows = _small_chunks(limbs)
    work = (64 if golden else 16) * pos.shape[0] * count
    run_kernel(cos_sin_columns_kernel, work, pos, limbs, chunks, exact_rows, out,
               np.asarray(cols, dtype=np.int64), bool(golden), flags)
    return flags
