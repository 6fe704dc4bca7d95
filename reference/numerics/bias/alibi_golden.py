"""ALiBi's golden quick phase (Numba, never fastmath): -m_h d for each head h and distinct
distance d, rounded once, with Ziv's rounding test (dd_elementary.round_test).

The slope m_h = 2**(-8k/c) is a double-double (hi, lo) rounded from mpmath at 200 bits
(|m_h - hi - lo| < 2**-106 m_h); d is an integer below 2**41, exact in a double. hi d is exact
(TwoProduct); lo d and the sum of the two error terms round once each (< 2**-105 |m_h d| together).
Total relative error below 2**-104; ALIBI_REL_ERR = 2**-100 is the bound the test assumes. A slope
that is a power of two (lo == 0: 8k/c an integer) makes hi d the exact product: error 0, always
certain. d == 0 gives +0.0, as mpmath's rounding of an exact zero (certify.nearest_double).
"""

import numba
import numpy as np

from reference.numerics.bias.dd_elementary import SOURCE_DIGEST, round_test, two_prod

ALIBI_REL_ERR = 2.0**-100


def _build(digest):
    """The kernel as a closure over dd_elementary.SOURCE_DIGEST (see there)."""

    @numba.njit(cache=True, fastmath=False)
    def quick_kernel(m_hi, m_lo, dists, out, flags):
        """out[h, t] = -m_h dists[t] rounded once; flags[h, t] = 1 where the rounding is not certain."""
        _digest = digest  # noqa: F841  (see _build)
        for h in range(m_hi.shape[0]):
            hi = m_hi[h]
            lo = m_lo[h]
            exact = lo == 0.0
            for t in range(dists.shape[0]):
                d = float(dists[t])
                p, e = two_prod(hi, d)
                e += lo * d
                err = 0.0 if exact else abs(p) * ALIBI_REL_ERR
                r, ok = round_test(-p, -e, err)
                out[h, t] = r + 0.0  # -0.0 -> +0.0
                flags[h, t] = 0 if ok else 1

    return quick_kernel


quick_kernel = _build(SOURCE_DIGEST)


def quick(m_hi, m_lo, dists):
    """(values [h, n], flags uint8 [h, n]) of the quick phase."""
    out = np.empty((m_hi.size, dists.size))
    flags = np.zeros((m_hi.size, dists.size), dtype=np.uint8)
    quick_kernel(np.ascontiguousarray(m_hi), np.ascontiguousarray(m_lo), np.ascontiguousarray(dists), out, flags)
    return out, flags
