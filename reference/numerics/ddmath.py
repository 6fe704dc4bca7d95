"""Scalar exact argument reduction and double-double sin/cos, shared by the Numba CPU and CUDA
kernels.

The angle is m * theta with m an integer (|m| <= 2**53) and theta one entry of a frequency table
(phase.py). The table stores v = 2 theta / pi, theta in *quarter turns* per unit position, as a
fixed-point number in 32-bit limbs held in uint64: ``limbs[row, 0]`` is the integer part and
``limbs[row, 1..F]`` are fractional limbs, v = sum_j limbs[row, j] * 2**(-32 j) truncated after F
limbs (F >= 7, chosen per table in phase.py so that the truncation error |m| * 2**(-32 F) stays
below 2**-116 times the smallest |m v mod 1| that any |m| <= 2**53 reaches).

1. ``quarter_turns`` (Payne-Hanek reduction, M. Payne and R. Hanek, "Radian reduction for
   trigonometric functions", SIGNUM Newsl. 18, 1983): |m| = mh * 2**32 + ml; every product of a
   32-bit half with a 32-bit limb is exact in uint64 and the columns are summed with explicit
   carries, from the last limb up. Integer arithmetic only, so the result is the exact product
   |m| * v (of the truncated v) modulo 4: the quadrant q (the integer part mod 4) and the
   fraction, centred to [-1/2, 1/2) (q absorbs the rounding). The fraction's leading five limbs
   (at least 129 significant bits) become a double-double phi with relative error < 2**-104.
   Nothing here depends on |m| any more: the reduction is exact for every position.
2. ``reduced_angle``: a = phi * pi/2 as a double-double (dd_mul with pi/2 to 107 bits): |a| <= pi/4,
   relative error < 2**-103.
3. Fast mode (``sincos_fast``): sin/cos(a_hi) from the math library, corrected to first order by
   a_lo (the dropped term a_lo**2 / 2 < 2**-106 relative), then mapped by quadrant and by the sign
   of m (sin is odd, cos even).
4. Golden mode (``sincos_golden``): sin and cos of a as double-doubles from a table of
   sin/cos(j/64), j = 0..51 (double-doubles from mpmath), and Taylor series of sin u, cos u on
   |u| <= 1/128 evaluated in double-double (truncation below 2**-116 relative). Total relative
   error below 2**-99; ``GOLDEN_REL_ERR`` = 2**-96 is the bound the rounding test assumes.
   ``round_dd`` rounds a double-double once to float64 and reports whether that rounding is
   certain (Ziv's test: every real within the error bound rounds to the same double); the host
   redoes the rare uncertain values in mpmath (phase.py).
5. ``rotate_golden``: (a, b) -> (a c - b s, a s + b c) with the double-double c, s, Dekker products
   and error-free sums, each output rounded once.

Every function is plain Python on floats and uint64 integers. ``jit_family(decorator, mul)``
re-binds them so that calls between them (and every floating-point product) resolve to compiled
versions: ``numba.njit`` for the CPU and ``numba.cuda.jit(device=True)`` for CUDA. All products
of floats go through ``mul``: on CUDA it is ``libdevice.dmul_rn``, which the compiler never fuses
into an FMA, because FMA contraction (NVVM's default, even without fastmath) would silently break
the error-free transformations. On the CPU, Numba without fastmath never contracts. Integer
products (uint64) are exact and need no such care.

The NumPy twin (``numpy_twin.py``) does not use this module: it reduces with float chunks and an
error-free float summation, and evaluates sin/cos by a different series.
"""

import math
import types

import mpmath
import numpy as np

# ---- constants -------------------------------------------------------------------------------

# Veltkamp's splitter for binary64: 2**27 + 1.
_SPLITTER = 134217729.0
TWO_M32 = 2.0**-32
TWO_M64 = 2.0**-64
TWO_M96 = 2.0**-96
TWO_M128 = 2.0**-128
# ETA = 2**-53 (1 + 2**-52): for a normal h > 0, fl(h + fl(h * ETA)) is the next double above h
# and fl(h - fl(h * ETA)) the one below (see ``round_dd``).
ETA = 2.0**-53 * (1.0 + 2.0**-52)
# Relative error bound of the golden double-double sin/cos (derivation in the module docstring
# and ACCURACY.md: reduction < 2**-103, series and table < 2**-100 together; 2**-96 leaves 8x).
GOLDEN_REL_ERR = 2.0**-96
# Relative error bound of a golden apply output, in units of |a c| + |b s| (c, s to
# GOLDEN_REL_ERR plus < 2**-100 of rounding in the double-double sums; 2**-95 leaves margin).
APPLY_REL_ERR = 2.0**-95
# Inputs of golden apply outside [2**-800, 2**990] (other than 0) could overflow Veltkamp's split
# or underflow a product's error term; those outputs are flagged for the exact host path.
APPLY_MIN_ABS = 2.0**-800
APPLY_MAX_ABS = 2.0**990

MASK32 = np.uint64(0xFFFFFFFF)
SHIFT32 = np.uint64(32)
HALF_LIMB = np.uint64(0x80000000)
U0 = np.uint64(0)
U1 = np.uint64(1)
U2 = np.uint64(2)
U3 = np.uint64(3)
# Scratch limbs per thread: the integer limb, up to MAX_FRAC_LIMBS fractional limbs, and four
# zero limbs read past the end when the leading limb is the last one.
MAX_FRAC_LIMBS = 15
MAX_LIMBS = MAX_FRAC_LIMBS + 5

_TABLE_STEPS = 64  # the golden table holds sin/cos(j / 64)
_TABLE_SIZE = 52  # j = 0..51 covers |a| <= pi/4 (j <= 50.3) with room


def _dd(x):
    """(hi, lo) of an mpf: hi the nearest double, lo the nearest double to the rest."""
    hi = float(x)
    return hi, float(x - mpmath.mpf(hi))


def _constants():
    with mpmath.workprec(320):
        pio2 = _dd(mpmath.pi / 2)
        sin_tab = [_dd(mpmath.sin(mpmath.mpf(j) / _TABLE_STEPS)) for j in range(_TABLE_SIZE)]
        cos_tab = [_dd(mpmath.cos(mpmath.mpf(j) / _TABLE_STEPS)) for j in range(_TABLE_SIZE)]
        # sin u = u * sum_k (-1)**k z**k / (2k+1)!, cos u = sum_k (-1)**k z**k / (2k)!, z = u**2;
        # on |u| <= 1/128 the first omitted terms are below 2**-116 and 2**-134 relative.
        sin_c = [_dd((-1) ** k / mpmath.factorial(2 * k + 1)) for k in range(6)]
        cos_c = [_dd((-1) ** k / mpmath.factorial(2 * k)) for k in range(7)]

    def arr(pairs, part):
        out = np.array([p[part] for p in pairs], dtype=np.float64)
        out.setflags(write=False)
        return out

    return (
        pio2,
        arr(sin_tab, 0),
        arr(sin_tab, 1),
        arr(cos_tab, 0),
        arr(cos_tab, 1),
        arr(sin_c, 0),
        arr(sin_c, 1),
        arr(cos_c, 0),
        arr(cos_c, 1),
    )


(
    (PIO2_HI, PIO2_LO),
    SIN_TAB_HI,
    SIN_TAB_LO,
    COS_TAB_HI,
    COS_TAB_LO,
    SIN_C_HI,
    SIN_C_LO,
    COS_C_HI,
    COS_C_LO,
) = _constants()

# ---- error-free transformations ------------------------------------------------------------


def mul(a, b):
    """Plain float64 product (re-bound to a non-contractible multiply on CUDA)."""
    return a * b


def two_sum(a, b):
    """Knuth's TwoSum: s + e == a + b exactly, s = fl(a + b). No ordering assumption."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def fast_two_sum(a, b):
    """Dekker's FastTwoSum: s + e == a + b exactly when |a| >= |b| (or a == 0)."""
    s = a + b
    e = b - (s - a)
    return s, e


def split(a):
    """Veltkamp split: a == hi + lo exactly, each with at most 26 significant bits."""
    c = mul(_SPLITTER, a)
    hi = c - (c - a)
    lo = a - hi
    return hi, lo


def two_prod(a, b):
    """Dekker's TwoProduct without FMA: p + e == a * b exactly, p = fl(a * b).

    Exact for |a|, |b| < 2**996 unless the error term underflows (|a b| < 2**-969).
    (T. J. Dekker, "A floating-point technique for extending the available precision",
    Numer. Math. 18, 1971.)
    """
    p = mul(a, b)
    ah, al = split(a)
    bh, bl = split(b)
    e = ((mul(ah, bh) - p) + mul(ah, bl) + mul(al, bh)) + mul(al, bl)
    return p, e


def dd_mul(ah, al, bh, bl):
    """(ah + al) * (bh + bl) as a normalised double-double; relative error < 2**-104."""
    p, e = two_prod(ah, bh)
    e = e + (mul(ah, bl) + mul(al, bh))
    return fast_two_sum(p, e)


def dd_add(ah, al, bh, bl):
    """(ah + al) + (bh + bl) as a normalised double-double (both sums error-free first)."""
    s, e = two_sum(ah, bh)
    t, f = two_sum(al, bl)
    e = e + t
    s, e = fast_two_sum(s, e)
    e = e + f
    return fast_two_sum(s, e)


# ---- exact reduction -----------------------------------------------------------------------


def quarter_turns(um, limbs, row, scratch):
    """Exact reduction of um * v (v = limbs[row], quarter turns) modulo 4.

    um: uint64 with um <= 2**53. limbs: uint64 [n, 1 + F], 32-bit values. scratch: uint64 array
    of at least F + 5 entries. Returns (q, phi_hi, phi_lo, exact): q (uint64, 0..3) and the
    double-double phi in [-1/2, 1/2] with um * v = 4 k + q + phi for an integer k; exact is True
    when phi == 0 exactly (then q alone is the answer).
    """
    nfrac = limbs.shape[1] - 1
    ml = um & MASK32
    mh = um >> SHIFT32
    # Schoolbook product, columns of weight 2**(-32 j) from j = F up to j = 0. Column j receives
    # lo(ml * L_j), hi(ml * L_(j+1)), lo(mh * L_(j+1)), hi(mh * L_(j+2)) and the carry: below 2**35,
    # so no uint64 sum can overflow. Weights above 2**0 only add multiples of 4 and are dropped.
    carry = U0
    nxt = U0  # destined for column j (computed at column j + 1)
    nxt2 = U0  # destined for column j - 1
    for jj in range(nfrac + 1):
        j = nfrac - jj
        limb = limbs[row, j]
        pl = ml * limb
        ph = mh * limb
        col = carry + (pl & MASK32) + nxt
        scratch[j] = col & MASK32
        carry = col >> SHIFT32
        nxt = nxt2 + (pl >> SHIFT32) + (ph & MASK32)
        nxt2 = ph >> SHIFT32
    q = scratch[0] & U3
    # Centre: a fraction D >= 1/2 stands for D - 1 = -(2**(32 F) - D) 2**(-32 F); its magnitude is
    # the one's complement of the limbs plus one unit of the last limb. The complement is taken
    # on the fly (XOR with flip); the dropped unit, 2**(-32 F), is far below the truncation error
    # budget |m| 2**(-32 F) <= 2**-116 min_gap that phase.py guarantees.
    negative = scratch[1] >= HALF_LIMB
    # selects rather than branches: the sign is random from one value to the next
    q = (q + (U1 if negative else U0)) & U3
    flip = MASK32 if negative else U0
    for j in range(nfrac + 1, nfrac + 5):
        scratch[j] = flip  # reads past the last limb see zeros after the XOR
    lead = 0
    for j in range(1, nfrac + 1):
        if scratch[j] != flip:
            lead = j
            break
    if lead == 0:
        return q, 0.0, 0.0, not negative
    # Five limbs from the leading nonzero one: value y0 + y1 + ... in units of 2**(-32 lead),
    # y0 >= 1; the limbs after them are below 2**-128 of it. Each y_t is exact (limbs < 2**32
    # convert exactly, through int64, which is cheaper than from uint64); the cascade of TwoSums
    # from the bottom is exact and only the sum of its error terms rounds (< 2**-105 relative).
    y0 = float(np.int64(scratch[lead] ^ flip))
    y1 = mul(float(np.int64(scratch[lead + 1] ^ flip)), TWO_M32)
    y2 = mul(float(np.int64(scratch[lead + 2] ^ flip)), TWO_M64)
    y3 = mul(float(np.int64(scratch[lead + 3] ^ flip)), TWO_M96)
    y4 = mul(float(np.int64(scratch[lead + 4] ^ flip)), TWO_M128)
    s, e3 = two_sum(y3, y4)
    s, e2 = two_sum(y2, s)
    s, e1 = two_sum(y1, s)
    s, e0 = two_sum(y0, s)
    hi, lo = fast_two_sum(s, e0 + (e1 + (e2 + e3)))
    scale = TWO_M32
    for _ in range(lead - 1):
        scale = mul(scale, TWO_M32)  # exact: a power of two, far above the subnormal range
    scale = -scale if negative else scale
    return q, mul(hi, scale), mul(lo, scale), False


def reduced_angle(m, limbs, row, scratch):
    """m * theta_row = (4 k + q) pi/2 + a * sign(m), with a = a_hi + a_lo, |a| <= pi/4.

    m: int64 with |m| <= 2**53. Returns (q, a_hi, a_lo, negative, exact) where negative is m < 0
    (the caller negates sin) and exact means a == 0 exactly.
    """
    negative = m < 0
    um = np.uint64(-m) if negative else np.uint64(m)
    q, fh, fl, exact = quarter_turns(um, limbs, row, scratch)
    if exact:
        return q, 0.0, 0.0, negative, True
    ah, al = dd_mul(fh, fl, PIO2_HI, PIO2_LO)
    return q, ah, al, negative, False


def quadrant(q, negative, sh, sl, ch, cl):
    """(sin, cos) of q pi/2 + a from those of a (double-doubles), then sin negated for m < 0.

    sin(q pi/2 + a) = +-(sin a or cos a), cos(q pi/2 + a) = +-(cos a or sin a): the swap for odd
    q and the signs are selects and exact products by +-1, not branches (q is random).
    """
    odd = (q & U1) != U0
    # sin: minus for q = 2, 3 (and once more for m < 0); cos: minus for q = 1, 2
    neg_s = ((q & U2) != U0) != negative
    neg_c = (((q + U1) & U2) != U0)
    sgn_s = -1.0 if neg_s else 1.0
    sgn_c = -1.0 if neg_c else 1.0
    s_h = mul(ch if odd else sh, sgn_s)
    s_l = mul(cl if odd else sl, sgn_s)
    c_h = mul(sh if odd else ch, sgn_c)
    c_l = mul(sl if odd else cl, sgn_c)
    return s_h, s_l, c_h, c_l


def sincos_fast(m, limbs, row, scratch):
    """(sin, cos) of m * theta_row: libm on a_hi, first-order a_lo correction (about 1 ulp)."""
    q, ah, al, negative, exact = reduced_angle(m, limbs, row, scratch)
    sh = math.sin(ah)
    ch = math.cos(ah)
    s = sh + mul(al, ch)
    c = ch - mul(al, sh)
    s, _, c, _ = quadrant(q, negative, s, 0.0, c, 0.0)
    return s, c


# ---- golden sin/cos --------------------------------------------------------------------------


def sincos_small_dd(ah, al):
    """sin and cos of a = ah + al, |a| <= pi/4 (+ tiny), as double-doubles (sh, sl, ch, cl).

    a = j/64 + u with |u| <= 1/128; sin a = S_j cos u + C_j sin u, cos a = C_j cos u - S_j sin u
    with S_j, C_j from the table and the series of sin u, cos u in double-double (Horner in u**2).
    """
    flip = ah < 0.0
    if flip:
        ah = -ah
        al = -al
    j = int(math.floor(mul(ah, 64.0) + 0.5))
    # exact (Sterbenz): ah is within 1/128 of j/64, so the difference needs no rounding
    uh, ul = two_sum(ah - mul(float(j), 0.015625), al)
    zh, zl = dd_mul(uh, ul, uh, ul)
    ph = SIN_C_HI[5]
    pl = SIN_C_LO[5]
    for k in range(4, -1, -1):
        ph, pl = dd_mul(ph, pl, zh, zl)
        ph, pl = dd_add(ph, pl, SIN_C_HI[k], SIN_C_LO[k])
    su_h, su_l = dd_mul(ph, pl, uh, ul)
    ph = COS_C_HI[6]
    pl = COS_C_LO[6]
    for k in range(5, -1, -1):
        ph, pl = dd_mul(ph, pl, zh, zl)
        ph, pl = dd_add(ph, pl, COS_C_HI[k], COS_C_LO[k])
    cu_h, cu_l = ph, pl
    sj_h = SIN_TAB_HI[j]
    sj_l = SIN_TAB_LO[j]
    cj_h = COS_TAB_HI[j]
    cj_l = COS_TAB_LO[j]
    t1h, t1l = dd_mul(sj_h, sj_l, cu_h, cu_l)
    t2h, t2l = dd_mul(cj_h, cj_l, su_h, su_l)
    sh, sl = dd_add(t1h, t1l, t2h, t2l)
    t1h, t1l = dd_mul(cj_h, cj_l, cu_h, cu_l)
    t2h, t2l = dd_mul(sj_h, sj_l, su_h, su_l)
    ch, cl = dd_add(t1h, t1l, -t2h, -t2l)
    if flip:
        sh = -sh
        sl = -sl
    return sh, sl, ch, cl


def sincos_golden(m, limbs, row, scratch):
    """(sh, sl, ch, cl, exact): sin and cos of m * theta_row as double-doubles.

    Relative error <= GOLDEN_REL_ERR each; exact is True when both are exact (sin 0, cos +-1...).
    """
    q, ah, al, negative, exact = reduced_angle(m, limbs, row, scratch)
    if exact:
        sh, sl, ch, cl = 0.0, 0.0, 1.0, 0.0
    else:
        sh, sl, ch, cl = sincos_small_dd(ah, al)
    sh, sl, ch, cl = quadrant(q, negative, sh, sl, ch, cl)
    return sh, sl, ch, cl, exact


def round_dd(h, l, err):
    """(r, certain): r = fl(h + l), and whether r is the nearest double to every real within err
    of h + l (Ziv's rounding test). err >= 0 is an absolute error bound.

    The half-gaps to the neighbouring doubles are formed exactly for normal r (see ETA); for
    subnormal or zero r they come out too small, never too large, so the test stays safe.
    """
    r, d = two_sum(h, l)
    if err == 0.0 and d == 0.0:
        return r, True
    ar = abs(r)
    if r < 0.0:
        d = -d
    eta = mul(ar, ETA)
    if d >= 0.0:
        gap = (ar + eta) - ar
    else:
        gap = ar - (ar - eta)
    need = mul(abs(d) + err, 1.0 + 2.0**-50)
    return r, need < mul(gap, 0.5)


def round_sincos(sh, sl, ch, cl, exact):
    """(sin, cos, flag): golden sin/cos rounded once; flag bit 0 (cos) / bit 1 (sin) is set
    where the rounding is not certain under GOLDEN_REL_ERR (exact values need no test)."""
    err_c = 0.0 if exact else mul(abs(ch), GOLDEN_REL_ERR)
    err_s = 0.0 if exact else mul(abs(sh), GOLDEN_REL_ERR)
    c, ok_c = round_dd(ch, cl, err_c)
    s, ok_s = round_dd(sh, sl, err_s)
    return s, c, (0 if ok_c else 1) | (0 if ok_s else 2)


def rotate(a, b, c, s):
    """(a, b) turned by the angle with cosine c and sine s: (a c - b s, a s + b c)."""
    return mul(a, c) - mul(b, s), mul(a, s) + mul(b, c)


def dot2_dd(a, ch, cl, b, sh, sl):
    """a (ch + cl) + b (sh + sl) as a double-double (a, b doubles): exact Dekker products of the
    high words, the low-word products and every error term summed into the low word."""
    p1, e1 = two_prod(a, ch)
    p2, e2 = two_prod(b, sh)
    s, e = two_sum(p1, p2)
    lo = (((e + e1) + e2) + mul(a, cl)) + mul(b, sl)
    return s, lo


def rotate_golden(a, b, sh, sl, ch, cl):
    """(o0, o1, certain) with o0 = a c - b s, o1 = a s + b c, each rounded once from a
    double-double; certain is False when either rounding is uncertain or an input is outside
    the range where the double-double products are exact (the host then recomputes both)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        # NaN/Inf propagate as in the fast path (there is no exact real result to round)
        c = ch + cl
        s = sh + sl
        o0, o1 = rotate(a, b, c, s)
        return o0, o1, True
    aa = abs(a)
    ab = abs(b)
    in_range = (aa == 0.0 or (aa >= APPLY_MIN_ABS and aa <= APPLY_MAX_ABS)) and (
        ab == 0.0 or (ab >= APPLY_MIN_ABS and ab <= APPLY_MAX_ABS)
    )
    h0, l0 = dot2_dd(a, ch, cl, -b, sh, sl)
    h1, l1 = dot2_dd(a, sh, sl, b, ch, cl)
    err0 = mul(mul(aa, abs(ch)) + mul(ab, abs(sh)), APPLY_REL_ERR)
    err1 = mul(mul(aa, abs(sh)) + mul(ab, abs(ch)), APPLY_REL_ERR)
    o0, ok0 = round_dd(h0, l0, err0)
    o1, ok1 = round_dd(h1, l1, err1)
    return o0, o1, ok0 and ok1 and in_range


# Dependency order: each function may only call functions listed before it.
_FAMILY = (
    two_sum,
    fast_two_sum,
    split,
    two_prod,
    dd_mul,
    dd_add,
    quarter_turns,
    reduced_angle,
    quadrant,
    sincos_fast,
    sincos_small_dd,
    sincos_golden,
    round_dd,
    round_sincos,
    rotate,
    dot2_dd,
    rotate_golden,
)

_CONSTANTS = (
    "_SPLITTER",
    "TWO_M32",
    "TWO_M64",
    "TWO_M96",
    "TWO_M128",
    "ETA",
    "GOLDEN_REL_ERR",
    "APPLY_REL_ERR",
    "APPLY_MIN_ABS",
    "APPLY_MAX_ABS",
    "MASK32",
    "SHIFT32",
    "HALF_LIMB",
    "U0",
    "U1",
    "U2",
    "U3",
    "PIO2_HI",
    "PIO2_LO",
    "SIN_TAB_HI",
    "SIN_TAB_LO",
    "COS_TAB_HI",
    "COS_TAB_LO",
    "SIN_C_HI",
    "SIN_C_LO",
    "COS_C_HI",
    "COS_C_LO",
)


# Functions that take array arguments. On the CPU a call boundary costs NRT reference counting
# of each array (atomics, tens of ns per value), so cpu_kernels inlines these at the Numba IR
# level; the pure-float functions stay calls (LLVM inlines the small ones, and inlining the big
# double-double ones would make the cold compile take minutes).
ARRAY_FUNCTIONS = ("quarter_turns", "reduced_angle", "sincos_fast", "sincos_golden")


def jit_family(decorator, mul_impl, array_decorator=None):
    """Compile the module's functions with ``decorator``, float products bound to ``mul_impl``.

    ``array_decorator`` (default: ``decorator``) compiles the functions in ARRAY_FUNCTIONS.
    Returns a SimpleNamespace with one compiled function per name. Each function is re-created
    with a private globals dict, so calls between them resolve to the compiled versions.
    """
    ns = {"math": math, "np": np, "mul": mul_impl, "__name__": __name__}
    for name in _CONSTANTS:
        ns[name] = globals()[name]
    out = {}
    for fn in _FAMILY:
        clone = types.FunctionType(fn.__code__, ns, fn.__name__, fn.__defaults__, fn.__closure__)
        clone.__qualname__ = fn.__qualname__
        clone.__module__ = fn.__module__
        clone.__doc__ = fn.__doc__
        if array_decorator is not None and fn.__name__ in ARRAY_FUNCTIONS:
            compiled = array_decorator(clone)
        else:
            compiled = decorator(clone)
        ns[fn.__name__] = compiled
        out[fn.__name__] = compiled
    return types.SimpleNamespace(**out)
