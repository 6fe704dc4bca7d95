"""FIRE's golden quick phase: MLP_h(x) rounded once, with Ziv's rounding test, x = psi(|i - j|) /
(psi(max(i, L)) + eps), psi(n) = log1p(|c| n) (reference.fire states the formula).

The MLP is piecewise linear in its scalar input. Unit k is active (W1_k x + b1_k > 0) on one side
of its breakpoint t_k = -b1_k / W1_k (always or never where W1_k = 0); between consecutive sorted
breakpoints the active set is fixed, so on segment s

    MLP_h(x) = A_hs x + B_hs,  A_hs = sum_{k active} W2_hk W1_k,  B_hs = b2_h + sum_{k active} W2_hk b1_k,

and the function is continuous (a unit switches where its pre-activation is 0). The host computes
every A_hs, B_hs exactly (integers in units of 2**-2148, the grid of products of doubles) and rounds
them to double-doubles; t_k exactly as fractions, rounded to double-doubles; s = the number of
breakpoints below x, by exact comparisons of normalised double-doubles.

Per entry: psi from a per-distance double-double table (dd_elementary.log1p_dd; per entry where
the distances span too wide a range), the row's 1/norm once, x by a dd product, the segment, then
A x + B per head (TwoProduct of the heads, the tails rounded) and the rounding test. Error bound,
with P_h = sum_k |W2_hk W1_k| and Q_h = sum_k |W2_hk b1_k| + |b2_h| (so |A_hs| <= P_h, |B_hs| <= Q_h):
- x: psi and the norm within LOG1P_REL_ERR = 2**-96 each (the products |c| n and |c| L are
  exact or 2**-105, log1p's relative condition number is at most 1), the eps sum, the division
  and the product 2**-104 each: |x~ - x| < 2**-94.5 |x|, moving MLP_h by at most P_h times that
  (it is P_h-Lipschitz);
- a segment picked with the rounded breakpoint t~_k instead of t_k only where x~ lies between
  them, where the unit's pre-activation is at most |W1_k| |t~_k - t_k| <= 2**-105 |b1_k|:
  at most 2**-105 Q_h;
- A, B rounded to double-doubles (2**-106 relative each), A x + B (the tail products and two
  additions, < 4 2**-106 (|A x| + |B|)): < 2**-102 (P_h |x| + Q_h).
Total below 2**-94 P_h |x| + 2**-101 Q_h; FIRE_REL_ERR = 2**-90 times (P_h |x~| + Q_h), plus
2**-1000 absolute, is the bound the test assumes (its P_h, Q_h summed in double and raised by
2**-40 relative to stay upper bounds).

Domain (``in_domain``): every nonzero |c|, eps, |L_multiplier|, init_L and weight in
[2**-200, 2**200]. Then x lies in {0} or [2**-401, 2**210], every product of the evaluation in
[2**-905, 2**620] or 0 (A and B are multiples of 2**-504), so TwoProduct is exact and nothing
under- or overflows. Outside it, and for the entries the test cannot certify, golden mode is
the mpmath computation (fire.golden_entry).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numba
import numpy as np

from reference.numerics.bias.dd_elementary import (
    SOURCE_DIGEST,
    dd_add,
    dd_div,
    dd_mul,
    fast_two_sum,
    log1p_dd,
    round_test,
    two_prod,
    two_sum,
)
from reference.numerics.bias.kerple_cpu_kernels import _run

FIRE_REL_ERR = 2.0**-90
FIRE_ABS_ERR = 2.0**-1000
TABLE_MAX = 1 << 22
_LOW, _HIGH = 2.0**-200, 2.0**200
_GRID = 2148  # products of doubles are integer multiples of 2**-2148


def in_domain(w, init_L, eps) -> bool:
    """Whether every input lies where the quick phase's double-double steps are exact (docstring)."""
    vals = np.concatenate([np.abs([w["c"], w["L_multiplier"], init_L, eps]), np.abs(w["W1"]).ravel(),
                           np.abs(w["b1"]), np.abs(w["W2"]).ravel(), np.abs(w["b2"])])
    nz = vals[vals != 0]
    return bool(eps > 0 and np.all((nz >= _LOW) & (nz <= _HIGH)))


def _grid(a: float, b: float) -> int:
    """a b exactly, as an integer count of 2**-2148 (a = ma 2**ea with an integer ma, frexp)."""
    ma, ea = math.frexp(a)
    mb, eb = math.frexp(b)
    return (int(ma * 2.0**53) * int(mb * 2.0**53)) << (ea + eb - 106 + _GRID)


def _dd_grid(n: int) -> tuple[float, float]:
    """(hi, lo) of n 2**-2148: hi the nearest double (integer true division rounds correctly),
    lo the nearest double to the rest."""
    one = 1 << _GRID
    hi = n / one
    num, den = hi.as_integer_ratio()
    return hi, (n - num * (one // den)) / one


def _dd(q) -> tuple[float, float]:
    """(hi, lo) of a Fraction: hi its nearest double, lo the nearest double to the rest."""
    hi = float(q)  # correctly rounded (integer true division)
    return hi, float(q - Fraction(hi))


def segments(w) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(t [2, m], A [2, H, m + 1], B [2, H, m + 1], P [H], Q [H]): the sorted breakpoints and the
    pieces as double-doubles (index 0 hi, 1 lo), and the error bound's sums (module docstring)."""
    w1, b1, w2, b2 = w["W1"][:, 0], w["b1"], w["W2"], w["b2"]
    heads, hidden = w2.shape
    units = [k for k in range(hidden) if w1[k] != 0]
    t = {k: Fraction(-float(b1[k])) / Fraction(float(w1[k])) for k in units}
    order = sorted(units, key=lambda k: t[k])
    m = len(order)
    tt = np.array([_dd(t[k]) for k in order], dtype=np.float64).reshape(m, 2).T.copy()
    A = np.empty((2, heads, m + 1))
    B = np.empty((2, heads, m + 1))
    for h in range(heads):
        a = sum(_grid(w2[h, k], w1[k]) for k in units if w1[k] < 0)  # below every breakpoint
        b = _grid(b2[h], 1.0) + sum(_grid(w2[h, k], b1[k]) for k in range(hidden)
                                    if (w1[k] < 0) or (w1[k] == 0 and b1[k] > 0))
        for s in range(m + 1):
            A[:, h, s] = _dd_grid(a)
            B[:, h, s] = _dd_grid(b)
            if s < m:  # crossing breakpoint s: its unit switches on (W1 > 0) or off (W1 < 0)
                k = order[s]
                sign = 1 if w1[k] > 0 else -1
                a += sign * _grid(w2[h, k], w1[k])
                b += sign * _grid(w2[h, k], b1[k])
    up = 1.0 + 2.0**-40
    P = (np.abs(w2) @ np.abs(w1)) * up
    Q = (np.abs(w2) @ np.abs(b1) + np.abs(b2)) * up
    return tt, A, B, P, Q


@numba.njit(cache=True, fastmath=False, inline="always")
def _psi(ac, d):
    """log1p(|c| d) as a double-double (|c| d exact by TwoProduct)."""
    wh, wl = two_prod(ac, d)
    return log1p_dd(wh, wl)


@numba.njit(cache=True, fastmath=False, inline="always")
def _row(i, qp, kp, ac, Lh, Ll, eps, ptab, use_table, t, A, B, P, Q, certify, xh, xl, seg, out):
    """Row i of the quick phase; returns the number of entries left uncertain (written as NaN
    where ``certify``; without it, fast mode, every entry keeps its rounded double-double)."""
    q = float(qp[i])
    if q > Lh or (q == Lh and Ll < 0.0):  # max(i, L), L = Lh + Ll exact
        nh, nl = _psi(ac, q)
    else:
        ph, pe = two_prod(ac, Lh)
        wh, wl = fast_two_sum(ph, pe + ac * Ll)
        nh, nl = log1p_dd(wh, wl)
    nh, nl = dd_add(nh, nl, eps, 0.0)
    ih, il = dd_div(1.0, 0.0, nh, nl)
    sk = kp.shape[0]
    if use_table:  # the gather apart, so that the product's loop vectorises
        for j in range(sk):
            d = abs(qp[i] - kp[j])
            xh[j] = ptab[0, d]
            xl[j] = ptab[1, d]
    else:
        for j in range(sk):
            xh[j], xl[j] = _psi(ac, float(abs(qp[i] - kp[j])))
    for j in range(sk):
        xh[j], xl[j] = dd_mul(xh[j], xl[j], ih, il)
    for j in range(sk):
        seg[j] = 0
    for k in range(t.shape[1]):
        th = t[0, k]
        tl = t[1, k]
        if certify:
            for j in range(sk):
                seg[j] += np.int64((xh[j] > th) | ((xh[j] == th) & (xl[j] > tl)))  # no branch: vectorises
        else:  # fast mode: the heads only; a unit misplaced where xh == th is off by |b1_k| 2**-53
            for j in range(sk):
                seg[j] += np.int64(xh[j] > th)
    # one segment per run of equal seg[j] (sorted keys give at most 2 (m + 1) runs per row: x is
    # monotone in the distance on each side of the query): its A, B are loop-invariant there, and
    # the loop over the run's keys vectorises (a gather of A, B per entry would not)
    bad = 0
    j0 = 0
    while j0 < sk:
        s = seg[j0]
        j1 = j0 + 1
        while j1 < sk and seg[j1] == s:
            j1 += 1
        for h in range(A.shape[1]):
            p_h = P[h]
            q_h = Q[h]
            ah = A[0, h, s]
            al = A[1, h, s]
            bh = B[0, h, s]
            bl = B[1, h, s]
            for j in range(j0, j1):
                p, e = two_prod(ah, xh[j])
                e += ah * xl[j] + al * xh[j]
                r, f = two_sum(p, bh)
                f += e + bl
                err = (p_h * abs(xh[j]) + q_h) * FIRE_REL_ERR + FIRE_ABS_ERR
                v, ok = round_test(r, f, err)
                ok = ok | (not certify)
                out[h, i, j] = v if ok else np.nan
                bad += 0 if ok else 1
        j0 = j1
    return bad


def _build(digest):
    """The kernel as a closure over dd_elementary.SOURCE_DIGEST (see there)."""

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def quick_kernel(qp, kp, ac, Lh, Ll, eps, dmax, t, A, B, P, Q, certify, out, bad):
        """out[h, i, j] = golden FIRE bias where certain, NaN elsewhere; bad[i] = NaN count of row i."""
        _digest = digest  # noqa: F841  (see _build)
        use_table = dmax >= 0
        ptab = np.empty((2, max(dmax + 1, 0)))
        for d in numba.prange(ptab.shape[1]):
            ptab[0, d], ptab[1, d] = _psi(ac, float(d))
        for i in numba.prange(qp.shape[0]):
            xh = np.empty(kp.shape[0])
            xl = np.empty(kp.shape[0])
            seg = np.empty(kp.shape[0], dtype=np.int64)
            bad[i] = _row(i, qp, kp, ac, Lh, Ll, eps, ptab, use_table, t, A, B, P, Q, certify, xh, xl, seg, out)

    return quick_kernel


quick_kernel = _build(SOURCE_DIGEST)


def quick(w, qp, kp, init_L, eps, certify=True):
    """(out [H, sq, sk] with NaN where uncertain, bad [sq] the NaN count per row); w checked
    weights in the domain (in_domain), qp, kp int64 positions. certify=False (fast mode): no
    rounding test, every value the double-double A x + B rounded once (within 2**-90 (P_h |x| +
    Q_h) of half an ulp: far inside reference.fire.fast_bound)."""
    t, A, B, P, Q = segments(w)
    out = np.empty((w["W2"].shape[0], qp.size, kp.size))
    bad = np.zeros(qp.size, dtype=np.int64)
    if out.size == 0:
        return out, bad
    dmax = int(max(abs(int(qp.max()) - int(kp.min())), abs(int(kp.max()) - int(qp.min()))))
    if dmax >= min(TABLE_MAX, qp.size * kp.size):
        dmax = -1  # no table: psi per entry
    Lh, Ll = two_prod_host(abs(w["L_multiplier"]), init_L)
    work = out.size * (t.shape[1] + 8)
    _run(quick_kernel, work, qp, kp, abs(w["c"]), Lh, Ll, float(eps), dmax, t, A, B, P, Q, bool(certify), out, bad)
    return out, bad


def two_prod_host(a: float, b: float) -> tuple[float, float]:
    """a b = hi + lo exactly (both doubles; the domain keeps the product away from under/overflow)."""
    hi = a * b
    return hi, float(Fraction(a) * Fraction(b) - Fraction(hi))
