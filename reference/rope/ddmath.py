"""Scalar double-double arithmetic for the RoPE angle, shared by the Numba CPU and CUDA kernels.

A double-double (hi, lo) represents hi + lo with |lo| <= ulp(hi)/2, about 106 significant bits.
The functions here compute ``sin`` and ``cos`` of ``m * theta`` where ``theta = theta_hi +
theta_lo`` is a double-double and m an integer (|m| <= 2**53, exact in float64):

1. ``two_prod(m, theta_hi)``: the exact product as (p_hi, p_lo), Dekker's FMA-free algorithm
   (T. J. Dekker, "A floating-point technique for extending the available precision",
   Numer. Math. 18, 1971) with Veltkamp's split; ``m * theta_lo`` is added in plain float64.
2. Cody-Waite style reduction (W. J. Cody and W. Waite, "Software Manual for the Elementary
   Functions", 1980) by 2*pi: k = round(p_hi / (2 pi)) and r = angle - k * (C1 + C2 + C3) where
   C1 + C2 + C3 is 2*pi to about 160 bits. Each k * Ci is formed exactly with ``two_prod`` (so
   the constant needs no trailing zero bits and k may be as large as 2**52), and all terms are
   summed with error-free ``two_sum`` into the double-double r = r_hi + r_lo, |r_hi| <= pi.
3. sin(r_hi + r_lo) = sin(r_hi) + r_lo cos(r_hi) and cos(r_hi + r_lo) = cos(r_hi) - r_lo
   sin(r_hi); the dropped terms are O(r_lo**2) < 2**-104.

Every function is plain Python on floats. ``jit_family(decorator, mul)`` re-binds them so that
calls between them (and every product) resolve to compiled versions: ``numba.njit`` for the CPU
and ``numba.cuda.jit(device=True)`` for CUDA. All products go through ``mul``: on CUDA it is
``libdevice.dmul_rn``, which the compiler never fuses into an FMA, because FMA contraction
(NVVM's default, even without fastmath) would silently break the error-free transformations.
On the CPU, Numba without fastmath never contracts, so ``mul`` is an ordinary product.

The NumPy twin (``numpy_twin.py``) does not use this module: it reduces in turns with exact
chunked products, an independent algorithm.
"""

import math
import types

# 2*pi = TWO_PI_1 + TWO_PI_2 + TWO_PI_3 (each the nearest double to the remainder); computed
# with mpmath at 300 bits, checked by tests/test_rope_ddmath.py.
TWO_PI_1 = 6.283185307179586
TWO_PI_2 = 2.4492935982947064e-16
TWO_PI_3 = -5.989539619436679e-33
INV_TWO_PI = 0.15915494309189535

# Veltkamp's splitter for binary64: 2**27 + 1.
_SPLITTER = 134217729.0


def mul(a, b):
    """Plain float64 product (re-bound to a non-contractible multiply on CUDA)."""
    return a * b


def two_sum(a, b):
    """Knuth's TwoSum: s + e == a + b exactly, s = fl(a + b). No ordering assumption."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
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
    """
    p = mul(a, b)
    ah, al = split(a)
    bh, bl = split(b)
    e = ((mul(ah, bh) - p) + mul(ah, bl) + mul(al, bh)) + mul(al, bl)
    return p, e


def dd_add_d(hi, lo, b):
    """(hi, lo) + b as an unnormalised double-double: the rounding error of hi + b joins lo."""
    s, e = two_sum(hi, b)
    return s, lo + e


def reduced_angle(m, theta_hi, theta_lo):
    """r_hi + r_lo = m * (theta_hi + theta_lo) - k * 2 pi with |r_hi| <= pi (about).

    m: float64 holding an integer with |m| <= 2**53. Returns (r_hi, r_lo) normalised.
    """
    p, pe = two_prod(m, theta_hi)
    plo = mul(m, theta_lo)
    k = math.floor(mul(p, INV_TWO_PI) + 0.5)
    c1, c1e = two_prod(k, TWO_PI_1)
    c2, c2e = two_prod(k, TWO_PI_2)
    c3 = mul(k, TWO_PI_3)
    # p and c1 nearly cancel; subtract them first (exactly), then the smaller terms in
    # decreasing order of size, each with its rounding error carried into the low word.
    s, e = two_sum(p, -c1)
    s, e = dd_add_d(s, e, pe)
    s, e = dd_add_d(s, e, -c1e)
    s, e = dd_add_d(s, e, -c2)
    s, e = dd_add_d(s, e, plo)
    e = e - c2e - c3
    return two_sum(s, e)


def sincos_dd(r_hi, r_lo):
    """(sin, cos) of r_hi + r_lo by a first-order correction of sin/cos(r_hi)."""
    sh = math.sin(r_hi)
    ch = math.cos(r_hi)
    return sh + mul(r_lo, ch), ch - mul(r_lo, sh)


def sincos_angle(m, theta_hi, theta_lo):
    """(sin, cos) of m * (theta_hi + theta_lo), accurate to about 1 ulp for |m| <= 2**31."""
    r_hi, r_lo = reduced_angle(m, theta_hi, theta_lo)
    return sincos_dd(r_hi, r_lo)


def rotate(a, b, c, s):
    """(a, b) turned by the angle with cosine c and sine s: (a c - b s, a s + b c)."""
    return mul(a, c) - mul(b, s), mul(a, s) + mul(b, c)


# Dependency order: each function may only call functions listed before it.
_FAMILY = (two_sum, split, two_prod, dd_add_d, reduced_angle, sincos_dd, sincos_angle, rotate)


def jit_family(decorator, mul_impl):
    """Compile the module's functions with ``decorator``, products bound to ``mul_impl``.

    Returns a SimpleNamespace with one compiled function per name. Each function is re-created
    with a private globals dict, so calls between them resolve to the compiled versions.
    """
    ns = {"math": math, "mul": mul_impl, "__name__": __name__}
    for name in ("TWO_PI_1", "TWO_PI_2", "TWO_PI_3", "INV_TWO_PI", "_SPLITTER"):
        ns[name] = globals()[name]
    out = {}
    for fn in _FAMILY:
        clone = types.FunctionType(fn.__code__, ns, fn.__name__, fn.__defaults__, fn.__closure__)
        clone.__qualname__ = fn.__qualname__
        clone.__module__ = fn.__module__
        clone.__doc__ = fn.__doc__
        compiled = decorator(clone)
        ns[fn.__name__] = compiled
        out[fn.__name__] = compiled
    return types.SimpleNamespace(**out)
