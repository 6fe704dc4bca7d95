"""KERPLE's golden quick phase (Numba, never fastmath): one value per head h and distinct distance
d >= 0, rounded once, with Ziv's rounding test (dd_elementary.round_test).

log:   -r1 log1p(r2 d): r2 d is exact as a double-double (TwoProduct), log1p_dd within
       LOG1P_REL_ERR, the product with r1 (TwoProduct of the head, the tail rounded) adds
       < 2**-104: relative error < 2**-95.9; KERPLE_LOG_REL_ERR = 2**-92. d == 0 gives +0.0, as
       mpmath's rounding of the exact zero (certify.nearest_double).
power: -r1 d**r2 = -r1 exp(r2 ln d), ln d = log1p_dd(d - 1) (d - 1 exact), r2 ln d a dd product:
       |r2 ln d| <= 2 ln 2**41 < 57, so its absolute error is below 57 (LOG1P_REL_ERR + 2**-104)
       < 2**-90.1, which exp turns into that relative error, plus EXP_REL_ERR and the product
       with r1: < 2**-89.5; KERPLE_POWER_REL_ERR = 2**-86. r2 == 1 and r2 == 2 with d <= 2**26
       are exact products (-r1 d, -r1 d**2 with d**2 a double): error 0, always certain (on the
       transcendental path an exact product that is a midpoint between doubles would never be
       certified). d == 0 gives
       -0.0 (the golden definition's explicit zero).

Entries outside the domain where the double-double steps are exact and cannot overflow (r1 >=
2**900, r2 d >= 2**990) are flagged, as are uncertain roundings: the host computes those in
mpmath (kerple.golden_value).
"""

import numba
import numpy as np

from reference.numerics.bias.dd_elementary import (
    SOURCE_DIGEST,
    exp_dd,
    log1p_dd,
    round_test,
    two_prod,
)

KERPLE_LOG_REL_ERR = 2.0**-92
KERPLE_POWER_REL_ERR = 2.0**-86
_R1_MAX = 2.0**900
_W_MAX = 2.0**990


@numba.njit(cache=True, fastmath=False, inline="always")
def _times_r1(r1, vh, vl):
    """r1 (vh + vl) as an unnormalised double-double (head exact, tail rounded)."""
    p, e = two_prod(r1, vh)
    return p, e + r1 * vl


def _build(digest):
    """The kernel as a closure over dd_elementary.SOURCE_DIGEST (see there)."""

    @numba.njit(cache=True, fastmath=False)
    def quick_kernel(r1, r2, dists, log_variant, out, flags):
        """out[h, t] = the golden bias of head h at distance dists[t] where certain (flags 0)."""
        _digest = digest  # noqa: F841  (see _build)
        for h in range(r1.shape[0]):
            a = r1[h]
            b = r2[h]
            for t in range(dists.shape[0]):
                d = float(dists[t])
                if d == 0.0:
                    out[h, t] = 0.0 if log_variant else -0.0
                    flags[h, t] = 0
                    continue
                wh, wl = two_prod(b, d)
                if not (a < _R1_MAX and (wh < _W_MAX or not log_variant)):
                    flags[h, t] = 1
                    continue
                if log_variant:
                    lh, ll = log1p_dd(wh, wl)
                    ph, pl = _times_r1(a, lh, ll)
                    err = abs(ph) * KERPLE_LOG_REL_ERR
                elif b == 1.0:
                    ph, pl = two_prod(a, d)
                    err = 0.0
                elif b == 2.0 and d <= 67108864.0:
                    ph, pl = two_prod(a, d * d)
                    err = 0.0
                else:
                    lh, ll = log1p_dd(d - 1.0, 0.0)
                    yh, yl = _times_r1(b, lh, ll)
                    eh, el = exp_dd(yh, yl)
                    ph, pl = _times_r1(a, eh, el)
                    err = abs(ph) * KERPLE_POWER_REL_ERR
                r, certain = round_test(-ph, -pl, err)
                out[h, t] = r
                flags[h, t] = 0 if certain else 1

    return quick_kernel


quick_kernel = _build(SOURCE_DIGEST)


def quick(r1, r2, dists, log_variant):
    """(values [h, n], flags uint8 [h, n]) of the quick phase; r1, r2 clamped float64 [h]."""
    out = np.empty((r1.size, dists.size))
    flags = np.zeros((r1.size, dists.size), dtype=np.uint8)
    a = np.ascontiguousarray
    quick_kernel(a(r1), a(r2), a(dists), bool(log_variant), out, flags)
    return out, flags
