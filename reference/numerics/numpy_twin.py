"""NumPy twin of the phase m * theta: an independent, vectorised path with exact reduction.

The Numba kernels (ddmath.py) multiply |m| by 2 theta / pi held in 32-bit *integer* limbs and
evaluate sin/cos from a table of sin/cos(j/64). This twin shares none of that code:

1. Reduction in float arithmetic. w_i = 2 theta_i / pi (quarter turns) is held as K float64
   chunks c_k of at most 26 significant bits (``FrequencyTable.chunks``, K per table). The signed
   position is split as m = m_h * 2**26 + m_l (0 <= m_l < 2**26, |m_h| <= 2**27), so each of the
   2K products m_l c_k and (m_h 2**26) c_k is exact in float64, and so is its remainder modulo 4,
   t = P - 4 rint(P / 4), in [-2, 2].
2. Error-free summation of the 2K remainders by extraction (Rump, Ogita and Oishi, "Accurate
   floating-point summation part I", SIAM J. Sci. Comput. 31, 2008, ExtractVector): at level l
   every term is split exactly into its part on the grid 2**-(46 + 48 l) and the rest; the grid
   parts of all terms sum exactly (at most 2**52 grid units), the rests go to level l + 1. The
   level sums tau_l are then carried like digits (each within half a unit of the level above),
   so the exact sum is N + f0 + tau_1 + ... with N an integer (the quadrant is N mod 4) and the
   centred fraction f is read off as a double-double to about 2**-105 relative however close f
   is to 0. The table's sizes guarantee that what the chunks and the last level leave out is
   below 2**-116 of the smallest |f| any |m| <= 2**53 can produce.
3. a = f * pi/2 as a double-double; fast mode takes sin/cos(a_hi) from NumPy with a first-order
   a_lo correction; golden mode evaluates the Taylor series of sin and cos on |a| <= pi/4 in
   double-double arithmetic (terms to a**29 and a**28; the first omitted ones are below 2**-118
   relative), then rounds once with a rounding test (uncertain values are flagged for the exact
   mpmath path in phase.py).

Shapes: positions int64 [n] -> cos, sin [n, count]; work is done in blocks of positions.
"""

import mpmath
import numpy as np

_SPLIT = 134217729.0  # 2**27 + 1
_HALF_BITS = 26
_LEVEL0_BITS = 46  # level-0 grid 2**-46: 32 terms of |t| <= 2 sum to < 2**52 grid units
_LEVEL_STEP = 48  # each level's rests (< half a grid unit) cover 48 more bits, 32 terms < 2**52
_BLOCK = 1 << 15  # positions x frequencies per block (bounds the temporaries)
# Relative error bound of the golden double-double sin/cos (2**-100 derived, 16x margin) and of
# a golden apply output in units of |a c| + |b s|.
GOLDEN_REL_ERR = 2.0**-96
APPLY_REL_ERR = 2.0**-95
APPLY_MIN_ABS = 2.0**-800
APPLY_MAX_ABS = 2.0**990


def level_bits(level):
    """Grid exponent of summation level ``level``: terms are split on the grid 2**-level_bits."""
    return _LEVEL0_BITS + _LEVEL_STEP * level


def _mp_constants():
    def dd(x):
        hi = float(x)
        return hi, float(x - mpmath.mpf(hi))

    with mpmath.workprec(256):
        pio2 = dd(mpmath.pi / 2)
        sin_c = [dd(mpmath.mpf((-1) ** k) / mpmath.factorial(2 * k + 1)) for k in range(15)]
        cos_c = [dd(mpmath.mpf((-1) ** k) / mpmath.factorial(2 * k)) for k in range(15)]
    return pio2, sin_c, cos_c


(_PIO2_HI, _PIO2_LO), _SIN_C, _COS_C = _mp_constants()


# ---- vectorised error-free transformations and double-double arithmetic ---------------------


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _fast_two_sum(a, b):
    s = a + b
    return s, b - (s - a)


def _split(a):
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _dd_mul(ah, al, bh, bl):
    p, e = _two_prod(ah, bh)
    return _fast_two_sum(p, e + (ah * bl + al * bh))


def _dd_add(ah, al, bh, bl):
    s, e = _two_sum(ah, bh)
    t, f = _two_sum(al, bl)
    s, e = _fast_two_sum(s, e + t)
    return _fast_two_sum(s, e + f)


# ---- reduction ------------------------------------------------------------------------------


def quarter_turns(positions, table):
    """Exact reduction of m * w_i modulo 4: (q, f_hi, f_lo), each float64 [n, count].

    q in {0, 1, 2, 3}; f = f_hi + f_lo in about [-1/2, 1/2] with m w_i = 4 k + q + f.
    positions: int64 [n], |m| <= 2**53.
    """
    m = np.asarray(positions, dtype=np.int64)[:, None]
    low = m & ((1 << _HALF_BITS) - 1)  # two's complement: 0 <= low < 2**26, also for m < 0
    high = ((m - low) >> _HALF_BITS).astype(np.float64) * float(1 << _HALF_BITS)
    low = low.astype(np.float64)
    chunks = table.chunks  # [K, count]
    k = chunks.shape[0]
    terms = np.empty((2 * k, m.shape[0], chunks.shape[1]))
    np.multiply(low[None], chunks[:, None, :], out=terms[:k])  # exact: 26 x 26 bits
    np.multiply(high[None], chunks[:, None, :], out=terms[k:])  # exact: 27 x 26 bits
    part = np.empty_like(terms)
    # exact: the remainder modulo 4, in [-2, 2]
    np.multiply(terms, 0.25, out=part)
    np.rint(part, out=part)
    part *= 4.0
    terms -= part
    levels = table.sum_levels
    taus = []
    for level in range(levels + 1):
        # exact: each term rounded to the level's grid (a power of two), and the rest
        np.multiply(terms, 2.0 ** level_bits(level), out=part)
        np.rint(part, out=part)
        part *= 2.0 ** -level_bits(level)
        terms -= part
        taus.append(part.sum(axis=0))  # exact: at most 2**52 grid units in every partial sum
    # Carry each level's excess into the level above, so |tau_l| <= half a unit of level l - 1.
    for level in range(levels, 0, -1):
        unit = 2.0 ** -level_bits(level - 1)
        carry = np.rint(taus[level] / unit) * unit
        taus[level] = taus[level] - carry
        taus[level - 1] = taus[level - 1] + carry
    whole = np.rint(taus[0])
    q = np.mod(whole, 4.0)
    taus[0] = taus[0] - whole
    # Non-overlapping signed digits: a TwoSum cascade from the bottom is exact, only the sum of
    # its error terms rounds.
    s = taus[levels]
    err = np.zeros_like(s)
    for level in range(levels - 1, -1, -1):
        s, e = _two_sum(taus[level], s)
        err += e
    f_hi, f_lo = _fast_two_sum(s, err)
    return q, f_hi, f_lo


def _reduced(positions, table):
    """(q, a_hi, a_lo): m theta_i = (4 k + q) pi/2 + a, a = f pi/2 as a double-double."""
    q, f_hi, f_lo = quarter_turns(positions, table)
    a_hi, a_lo = _dd_mul(f_hi, f_lo, _PIO2_HI, _PIO2_LO)
    return q, a_hi, a_lo


def _by_quadrant(q, s, c):
    """sin and cos of q pi/2 + a from those of a (arrays, or tuples of arrays for dd)."""
    odd = (q == 1.0) | (q == 3.0)
    flip_s = q >= 2.0  # sin(q pi/2 + a) = +-sin a (q even) or +-cos a (q odd)
    flip_c = (q == 1.0) | (q == 2.0)
    s2 = tuple(np.where(odd, cv, sv) for sv, cv in zip(s, c))
    c2 = tuple(np.where(odd, sv, cv) for sv, cv in zip(s, c))
    s2 = tuple(np.where(flip_s, -v, v) for v in s2)
    c2 = tuple(np.where(flip_c, -v, v) for v in c2)
    return s2, c2


def _sincos_dd(a_hi, a_lo):
    """sin and cos of a = a_hi + a_lo (|a| <= pi/4 + tiny) as double-doubles, Taylor in dd."""
    z_hi, z_lo = _dd_mul(a_hi, a_lo, a_hi, a_lo)
    ones = np.ones_like(a_hi)
    sh, sl = _SIN_C[-1][0] * ones, _SIN_C[-1][1] * ones
    for c_hi, c_lo in reversed(_SIN_C[:-1]):
        sh, sl = _dd_mul(sh, sl, z_hi, z_lo)
        sh, sl = _dd_add(sh, sl, c_hi, c_lo)
    sh, sl = _dd_mul(sh, sl, a_hi, a_lo)
    ch, cl = _COS_C[-1][0] * ones, _COS_C[-1][1] * ones
    for c_hi, c_lo in reversed(_COS_C[:-1]):
        ch, cl = _dd_mul(ch, cl, z_hi, z_lo)
        ch, cl = _dd_add(ch, cl, c_hi, c_lo)
    return sh, sl, ch, cl


def _round_dd(h, l, err):
    """(r, certain): r = fl(h + l); certain where every real within err of h + l rounds to r."""
    r, d = _two_sum(h, l)
    ar = np.abs(r)
    away = np.where(r < 0.0, -d, d) >= 0.0  # the remainder points away from zero
    gap = np.where(away, np.nextafter(ar, np.inf) - ar, ar - np.nextafter(ar, 0.0))
    need = (np.abs(d) + err) * (1.0 + 2.0**-50)
    certain = (need < 0.5 * gap) | ((d == 0.0) & (err == 0.0))
    return r, certain


def _golden_dd(positions, table):
    """sin and cos of m theta_i as double-doubles (sh, sl), (ch, cl) and exact mask [n, count]."""
    q, a_hi, a_lo = _reduced(positions, table)
    sh, sl, ch, cl = _sincos_dd(a_hi, a_lo)
    s, c = _by_quadrant(q, (sh, sl), (ch, cl))
    exact = (a_hi == 0.0) & (a_lo == 0.0)
    return s, c, exact


def cos_sin(positions, table, golden=False):
    """(cos, sin, flags) of m * theta_i for positions int64 [n]: float64 [n, count] each.

    fast (golden=False): flags is None. golden: the nearest doubles, with flags uint8 [n, count]
    nonzero where the rounding test could not certify the result (phase.py recomputes those).
    """
    m = np.asarray(positions, dtype=np.int64).reshape(-1)
    n, count = m.shape[0], table.count
    cos = np.empty((n, count))
    sin = np.empty((n, count))
    flags = np.zeros((n, count), dtype=np.uint8) if golden else None
    rows = max(1, _BLOCK // count)
    for start in range(0, n, rows):
        blk = m[start : start + rows]
        sl_ = slice(start, start + blk.shape[0])
        if not golden:
            q, a_hi, a_lo = _reduced(blk, table)
            s_hi = np.sin(a_hi)
            c_hi = np.cos(a_hi)
            (s,), (c,) = _by_quadrant(q, (s_hi + a_lo * c_hi,), (c_hi - a_lo * s_hi,))
            cos[sl_], sin[sl_] = c, s
            continue
        (sh, sl), (ch, cl), exact = _golden_dd(blk, table)
        s, ok_s = _round_dd(sh, sl, GOLDEN_REL_ERR * np.abs(sh))
        c, ok_c = _round_dd(ch, cl, GOLDEN_REL_ERR * np.abs(ch))
        cos[sl_], sin[sl_] = c, s
        flags[sl_] = (~(ok_c | exact)).astype(np.uint8) | ((~(ok_s | exact)).astype(np.uint8) << 1)
    return cos, sin, flags


def _pair_slices(r, layout):
    if layout == "half":
        return slice(0, r // 2), slice(r // 2, r)
    return slice(0, r, 2), slice(1, r, 2)


def _dot2(a, ch, cl, b, sh, sl):
    """a (ch + cl) + b (sh + sl) as a double-double (Dekker products, error terms in the tail)."""
    p1, e1 = _two_prod(a, ch)
    p2, e2 = _two_prod(b, sh)
    s, e = _two_sum(p1, p2)
    return s, (((e + e1) + e2) + a * cl) + b * sl


def rotate_golden(out, positions, table, r, layout):
    """Golden apply in place on out [b, s, h, d] (float64): each output a c - b s, a s + b c is
    the double-double value rounded once. Returns flags uint8 [b, s, h, r/2], nonzero where a
    pair must be recomputed exactly (uncertain rounding, or an input outside [2**-800, 2**990])."""
    nb, ns, nh, _ = out.shape
    half = r // 2
    flags = np.zeros((nb, ns, nh, half), dtype=np.uint8)
    first, second = _pair_slices(r, layout)
    m = np.asarray(positions, dtype=np.int64).reshape(-1)
    view = out.reshape(nb * ns, nh, out.shape[3])
    fview = flags.reshape(nb * ns, nh, half)
    rows = max(1, _BLOCK // (half * nh))
    for start in range(0, nb * ns, rows):
        stop = min(nb * ns, start + rows)
        (sh, sl), (ch, cl), _ = _golden_dd(m[start:stop], table)
        sh, sl, ch, cl = (v[:, None, :] for v in (sh, sl, ch, cl))  # broadcast over heads
        a = view[start:stop, :, first].copy()
        b = view[start:stop, :, second].copy()
        finite = np.isfinite(a) & np.isfinite(b)
        aa, ab = np.abs(a), np.abs(b)
        in_range = ((aa == 0.0) | ((aa >= APPLY_MIN_ABS) & (aa <= APPLY_MAX_ABS))) & (
            (ab == 0.0) | ((ab >= APPLY_MIN_ABS) & (ab <= APPLY_MAX_ABS))
        )
        with np.errstate(invalid="ignore", over="ignore"):
            h0, l0 = _dot2(a, ch, cl, -b, sh, sl)
            h1, l1 = _dot2(a, sh, sl, b, ch, cl)
            o0, ok0 = _round_dd(h0, l0, APPLY_REL_ERR * (aa * np.abs(ch) + ab * np.abs(sh)))
            o1, ok1 = _round_dd(h1, l1, APPLY_REL_ERR * (aa * np.abs(sh) + ab * np.abs(ch)))
            # NaN/Inf inputs: the plain rotation with the rounded cos/sin, as the fast path does
            c, s = ch + cl, sh + sl
            o0 = np.where(finite, o0, a * c - b * s)
            o1 = np.where(finite, o1, a * s + b * c)
        view[start:stop, :, first] = o0
        view[start:stop, :, second] = o1
        fview[start:stop] = (finite & ~(ok0 & ok1 & in_range)).astype(np.uint8)
    return flags
