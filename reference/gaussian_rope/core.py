"""Gaussian-kernel RoPE: the kernel K(m), f(x, m) = K(m) R_m x and the score form (see __init__)."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

import mpmath
import numpy as np

from reference.numerics import phase, rotation
from reference.numerics.ddmath import fast_two_sum, two_prod, two_sum
from reference.numerics.layouts import pair_indices
from reference.numerics.validate import (
    as_x,
    check_backend,
    check_base,
    check_layout,
    check_mode,
    check_positions,
    check_x,
    resolve_rotary_dim,
)

DOCUMENT_KERNEL = {"a1": 0.7, "a2": 0.3, "s1": 5.0, "s2": 20.0}  # seed document 002's example


def check_kernel(kernel) -> tuple[float, float, float, float]:
    """(a1, a2, s1, s2) as floats; ValueError naming the bad key."""
    if not isinstance(kernel, dict) or set(kernel) != {"a1", "a2", "s1", "s2"}:
        raise ValueError(f"kernel: must be a dict with keys a1, a2, s1, s2, got {kernel!r}")
    out = []
    for key in ("a1", "a2", "s1", "s2"):
        v = kernel[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"kernel: {key} must be a finite number, got {v!r}")
        if (key[0] == "a" and v < 0) or (key[0] == "s" and v <= 0):
            raise ValueError(f"kernel: {key} must be {'>= 0' if key[0] == 'a' else '> 0'}, got {v!r}")
        out.append(float(v))
    return tuple(out)


def kernel_mp(m, kernel):
    """K(m) as an mpf at the current mpmath precision (parameters taken exactly as float64)."""
    a1, a2, s1, s2 = (mpmath.mpf(v) for v in check_kernel(kernel))
    m = mpmath.mpf(int(m))
    return a1 * mpmath.exp(-m * m / (2 * s1 * s1)) + a2 * mpmath.exp(-m * m / (2 * s2 * s2))


def _factor(kernel):
    cache: dict = {}

    def factor(prec, m, i=None):  # K(m): the same for every pair and the tail
        key = (prec, m)
        if key not in cache:
            with mpmath.workprec(prec):
                cache[key] = kernel_mp(m, kernel)
        return cache[key]

    return factor


# ln 2 split (fdlibm's e_exp.c constants): LN2_HI has 21 trailing zero bits, so k LN2_HI is exact
# for every k < 2**21; LN2_HI + LN2_LO = ln 2 to about 2**-85.
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
# a exp(-e) < 2**1024 exp(-e) is below 2**-1076 once e > 1460: the term rounds away
EXP_ZERO = 1460.0
FAST_KERNEL_ULPS = 3


def _gaussian_term(mf, a, s) -> np.ndarray:
    """a exp(-(m / s)^2 / 2) in float64, within FAST_KERNEL_ULPS of the exact value (numpy).

    exp's argument e reaches 745 before the term underflows, and a float64 e carries an absolute
    error of e u, which exp turns into a relative one: 745 u, 200-odd ulps at the seed document's
    m = 669. So e is formed as a double-double: q = m / s (m exact, |m| <= 2**53) with its
    remainder (m - q s) / s from Dekker's two_prod, e = q^2 / 2 from two_prod again (relative error
    below 2**-100). Then exp(-e) = 2**-k exp(-r), k = floor(e / ln 2), r = e - k ln 2 in about
    [0, ln 2) as a double-double (e - k LN2_HI exact by Sterbenz; the tails added by two_sum):
    a exp(-r_hi) (1 - r_lo) stays normal for every a, and ldexp by -k rounds once where the term
    is subnormal. Error: exp's 1 ulp (2u) and two roundings (u each) relative, plus half a
    subnormal ulp from ldexp: |err| <= 4u |T| + 2**-1075, and the sum of the two terms one
    rounding more: 3 ulps of K (FAST_KERNEL_ULPS).
    Terms with |q| < 2**-200 are a (exactly the rounded value); with |q| > 64 (e > 2048) or
    m / s overflowing (tiny s) they are 0, as exactly rounded."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        q = mf / s
    aq = np.abs(q)
    out = np.zeros(mf.shape)
    out[aq < 2.0**-200] = a
    live = (aq >= 2.0**-200) & (aq <= 64.0)
    if not np.any(live) or a == 0:
        return out
    m, q = mf[live], q[live]
    p, pe = two_prod(q, s)
    q_lo = ((m - p) - pe) / s  # m - p exact (Sterbenz: p = q s is m to a few u)
    sq, sq_e = two_prod(q, q)
    e_hi, e_lo = fast_two_sum(sq, sq_e + 2.0 * q * q_lo)
    e_hi, e_lo = 0.5 * e_hi, 0.5 * e_lo  # exact: e_hi >= 2**-401
    k = np.floor(e_hi / LN2_HI)
    # e_hi - k LN2_HI is exact (k LN2_HI exact, within a factor 2 of e_hi when k >= 1); k LN2_LO
    # reaches 2**-22, so it joins r_hi by two_sum: the tail r_lo (< u r) then enters exp to first order
    r_hi, r_lo = two_sum(e_hi - k * LN2_HI, e_lo - k * LN2_LO)
    t = np.exp(-r_hi)
    term = np.ldexp(a * (t - t * r_lo), -k.astype(np.int64))
    out[live] = np.where(e_hi > EXP_ZERO, 0.0, term)
    return out


def kernel(positions, kernel, mode="fast") -> np.ndarray:
    """K(m) float64 for integer positions of any shape. fast: numpy, within FAST_KERNEL_ULPS = 3
    ulps of the exact value (ulps of K, at least 2**-1074; _gaussian_term); golden: correctly
    rounded (subnormals and 0 included)."""
    m = check_positions(positions)
    a1, a2, s1, s2 = check_kernel(kernel)
    if check_mode(mode) == "fast":
        mf = m.astype(np.float64)
        return _gaussian_term(mf, a1, s1) + _gaussian_term(mf, a2, s2)
    factor = _factor(kernel)
    flat = [phase.settle(lambda prec, p=int(p): (factor(prec, p), abs(factor(prec, p)) * mpmath.mpf(2) ** (4 - prec)))
            for p in m.reshape(-1)]
    return np.array(flat, dtype=np.float64).reshape(m.shape)


_kernel = kernel  # for the functions below, whose ``kernel`` argument is the parameters


# ---- K(m) rounded once, for fast mode ------------------------------------------------------
# Fast mode multiplies by float64(K(m)), K evaluated at phase.PREC_BITS and rounded once. K does
# not depend on the pair, so it is rounded once per distinct |m| (K is even: it depends on m^2),
# kept across calls (at most FAST_CACHE_POSITIONS values for each of FAST_CACHE_KERNELS kernels),
# and not evaluated at all where it is certainly below half the smallest subnormal.
FAST_CACHE_POSITIONS = 1 << 16
FAST_CACHE_KERNELS = 8
_fast_cache: OrderedDict = OrderedDict()
_fast_lock = threading.Lock()


def zero_from(params) -> int:
    """The smallest M >= 0 such that float64(K(m)) == 0 for every |m| >= M (proved, not sampled).

    K(m) <= (a1 + a2) exp(-m^2 / (2 s^2)) with s = max(s1, s2), and a value below 2^-1075 (half
    the smallest subnormal) rounds to 0. That holds once m^2 > T = 2 s^2 (ln(a1 + a2) + 1075 ln 2);
    T is evaluated at 100 bits (relative error far below the margin) and M = floor(sqrt(T)) + 2.
    a1 = a2 = 0: K is 0 everywhere (M = 0)."""
    a1, a2, s1, s2 = params
    if a1 + a2 == 0:
        return 0
    with mpmath.workprec(100):
        s = mpmath.mpf(max(s1, s2))
        t = 2 * s * s * (mpmath.log(mpmath.mpf(a1) + mpmath.mpf(a2)) + 1075 * mpmath.log(2))
        return 0 if t < 0 else int(mpmath.floor(mpmath.sqrt(t))) + 2


def _fast_entry(params):
    with _fast_lock:
        entry = _fast_cache.get(params)
        if entry is None:
            entry = _fast_cache[params] = (zero_from(params), {})
            while len(_fast_cache) > FAST_CACHE_KERNELS:
                _fast_cache.popitem(last=False)
        _fast_cache.move_to_end(params)
        return entry


def fast_kernel_values(flat, kernel) -> np.ndarray:
    """float64 [len(flat)]: K(m) at phase.PREC_BITS rounded once (phase.to_double), for int64 flat
    positions: exactly what ``phase.rounded_factors`` gives for the factor of ``apply``, evaluated
    once per distinct |m| below ``zero_from`` and 0.0 past it."""
    params = check_kernel(kernel)
    zero, known = _fast_entry(params)
    values, inverse = np.unique(np.abs(flat), return_inverse=True)
    out = np.zeros(values.size)
    factor = None
    for k, n in enumerate(values.tolist()):
        if n >= zero:
            break  # values are sorted: every later one is past the threshold too
        v = known.get(n)
        if v is None:
            if factor is None:
                factor = _factor(kernel)
            v = phase.to_double(factor(phase.PREC_BITS, n))
            with _fast_lock:
                if len(known) < FAST_CACHE_POSITIONS:
                    known[n] = v
        out[k] = v
    return out[inverse.reshape(-1)]


_golden_cache: OrderedDict = OrderedDict()


def golden_kernel_values(flat, kernel):
    """(float64 [len(flat), 1, 4], frel): K(m) for int64 flat positions as ``phase.dd_factor``
    rows (K = 2^fe (fh + fl), however small), K evaluated at phase.PREC_BITS once per distinct |m|
    and kept across calls (FAST_CACHE_POSITIONS per kernel, FAST_CACHE_KERNELS kernels): the
    amplitudes of golden mode's quick phase (phase.scaled_rotate's golden_factors)."""
    params = check_kernel(kernel)
    with _fast_lock:
        known = _golden_cache.get(params)
        if known is None:
            known = _golden_cache[params] = {}
            while len(_golden_cache) > FAST_CACHE_KERNELS:
                _golden_cache.popitem(last=False)
        _golden_cache.move_to_end(params)
    values, inverse = np.unique(np.abs(flat), return_inverse=True)
    out = np.empty((values.size, 1, 4))
    factor = None
    for k, n in enumerate(values.tolist()):
        v = known.get(n)
        if v is None:
            if factor is None:
                factor = _factor(kernel)
            v = phase.dd_factor(factor(phase.PREC_BITS, n))
            with _fast_lock:
                if len(known) < FAST_CACHE_POSITIONS:
                    known[n] = v
        out[k, 0] = v
    return out[inverse.reshape(-1)], phase.DD_FACTOR_REL


def apply(x, positions, *, kernel, rotary_dim=None, base=10000.0, layout="half", backend="cpu", mode="fast"):
    """K(m) R_m x, float64 [batch, seq, heads, head_dim] (the whole vector scaled by K(m)).

    x, positions, rotary_dim, base, layout, backend as reference.rope.apply. mode "fast": the
    fast rotation times K(m) in float64; "golden": each output the nearest double to the exact
    K(m) (a cos - b sin) (resp. K(m) x_j in the tail).
    """
    check_kernel(kernel)
    xa = as_x(x)
    r = resolve_rotary_dim(rotary_dim, xa.shape[3])
    b = check_base(base)
    layout = check_layout(layout)
    m = check_positions(positions, xa.shape[:2])
    backend = check_backend(backend)
    mode = check_mode(mode)
    # the cpu fast path only reads x (one pass into a new array); the others write into a copy
    out = xa if (backend, mode) == ("cpu", "fast") else check_x(x)
    return phase.scaled_rotate(out, m, phase.ladder(r, b), _factor(kernel), r, layout, backend, mode,
                               scale_tail=True, per_pair=False,
                               fast_factors=lambda flat: fast_kernel_values(flat, kernel),
                               golden_factors=lambda flat: golden_kernel_values(flat, kernel))


def score(q, k, q_positions, k_positions, *, kernel, rotary_dim=None, base=10000.0, layout="half", mode="fast"):
    """The score form K(n - m) q_m^T R_(n-m) k_n, float64 [batch, heads, sq, sk] for q [b, sq, h, d]
    at positions [b, sq] (m) and k [b, sk, h, d] at [b, sk] (n); the tail past rotary_dim enters
    as the plain product. Per pair, q^T R_d k = (q_a k_a + q_b k_b) cos(d theta) + (q_b k_a - q_a k_b)
    sin(d theta) with d = n - m (RoFormer eq. 16).

    fast: q and k rotated by the fast reference, the dot product with math.fsum, times K(n - m) in
    float64. golden: each score the nearest double to the exact value (Ziv's loop in mpmath).
    """
    check_kernel(kernel)
    qx, kx = check_x(q), check_x(k)
    r = resolve_rotary_dim(rotary_dim, qx.shape[3])
    b = check_base(base)
    layout = check_layout(layout)
    qp = check_positions(q_positions, qx.shape[:2])
    kp = check_positions(k_positions, kx.shape[:2])
    if kx.shape[0] != qx.shape[0] or kx.shape[2:] != qx.shape[2:]:
        raise ValueError(f"k: shape {kx.shape} does not match q {qx.shape} (batch, heads, head_dim)")
    nb, sq, nh, _ = qx.shape
    sk = kx.shape[1]
    out = np.empty((nb, nh, sq, sk))
    if check_mode(mode) == "fast":
        qr = rotation.apply(qx, qp, rotary_dim=r, base=b, layout=layout, backend="numpy")
        kr = rotation.apply(kx, kp, rotary_dim=r, base=b, layout=layout, backend="numpy")
        kern = _kernel(kp[:, None, :] - qp[:, :, None], kernel)  # K(n - m) [b, sq, sk]
        for b_, h, i, j in np.ndindex(nb, nh, sq, sk):
            out[b_, h, i, j] = kern[b_, i, j] * math.fsum((qr[b_, i, h] * kr[b_, j, h]).tolist())
        return out
    table = phase.ladder(r, b)
    first, second = pair_indices(r, layout)
    factor = _factor(kernel)
    for b_, h, i, j in np.ndindex(nb, nh, sq, sk):
        qv, kv = qx[b_, i, h], kx[b_, j, h]
        d = int(kp[b_, j]) - int(qp[b_, i])
        out[b_, h, i, j] = phase.settle(_score_compute(qv, kv, d, table, first, second, r, factor))
    return out


def _score_compute(qv, kv, d, table, first, second, r, factor):
    """compute(prec) for Ziv's loop: K(d) (sum over pairs of q^T R_d k, plus the tail's q . k)."""

    def compute(prec):
        ulp = mpmath.mpf(2) ** (8 - prec)  # each mpmath operation at prec bits, with margin
        total, bound = mpmath.mpf(0), mpmath.mpf(0)
        for i, (a, bb) in enumerate(zip(first, second)):
            c, s, err = phase.exact_cos_sin(table, d, i, prec)  # err: absolute, on cos and sin
            qa, qb, ka, kb = (mpmath.mpf(float(v)) for v in (qv[a], qv[bb], kv[a], kv[bb]))
            total += (qa * ka + qb * kb) * c + (qb * ka - qa * kb) * s
            bound += (abs(qa) + abs(qb)) * (abs(ka) + abs(kb)) * (2 * err + ulp)
        for j in range(r, qv.shape[0]):
            product = mpmath.mpf(float(qv[j])) * mpmath.mpf(float(kv[j]))
            total += product
            bound += abs(product) * ulp
        f = factor(prec, d, None)
        return f * total, abs(f) * (bound + abs(total) * ulp)

    return compute
