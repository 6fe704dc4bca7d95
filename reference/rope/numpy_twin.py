"""NumPy twin of the RoPE cos/sin table: an independent, vectorised path with exact reduction.

The Numba kernels (ddmath.py) carry the angle m * theta_i in radians as a double-double and
reduce it by a multi-part 2*pi. This twin works in *turns* instead: with u_i = theta_i / (2 pi)
split into chunks c_k of at most 26 significant bits (theta.inv_freq_turn_chunks) and the
position split as m = m_h * 2**26 + m_l (|m_h| <= 2**27, 0 <= m_l < 2**26), every product
(m_h 2**26) c_k and m_l c_k is exact in float64, and so is its fractional part P - rint(P).
The fractional parts are summed error-free into a double-double t (|t| <= 1/2 turn), then
multiplied by 2*pi as a double-double, and sin/cos are taken of the hi word with the same
first-order lo-word correction. Nothing here calls the Numba code.

Shapes: positions [...] (int64) -> cos, sin [..., r/2].
"""

import numpy as np

from .theta import inv_freq_turn_chunks

_TWO_PI_HI = 6.283185307179586
_TWO_PI_LO = 2.4492935982947064e-16
_SPLIT = 134217729.0  # 2**27 + 1
_HALF_BITS = 26


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a):
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def turns(positions, rotary_dim, base):
    """m * theta_i / (2 pi) modulo 1 as a double-double (t_hi, t_lo), |t_hi| <= 1/2.

    positions: int64 array [...], |m| <= 2**53. Returns two float64 arrays [..., r/2].
    """
    m = np.asarray(positions, dtype=np.int64)[..., None]
    low = m & ((1 << _HALF_BITS) - 1)  # two's complement: 0 <= low < 2**26, also for m < 0
    high = ((m - low) >> _HALF_BITS).astype(np.float64) * float(1 << _HALF_BITS)
    low = low.astype(np.float64)
    chunks = inv_freq_turn_chunks(rotary_dim, base)
    s = np.zeros(m.shape[:-1] + (chunks.shape[1],), dtype=np.float64)
    e = np.zeros_like(s)
    # Add the small chunks first; every term is an exact fractional part in [-1/2, 1/2].
    for k in range(chunks.shape[0] - 1, -1, -1):
        for part in (low, high):
            p = part * chunks[k]
            s, err = _two_sum(s, p - np.rint(p))
            e += err
    s -= np.rint(s)
    return _two_sum(s, e)


def cos_sin(positions, rotary_dim, base):
    """cos and sin of m * theta_i, each float64 [..., r/2], to about 1 ulp."""
    t_hi, t_lo = turns(positions, rotary_dim, base)
    p, p_err = _two_prod(t_hi, _TWO_PI_HI)
    a_hi, a_lo = _two_sum(p, p_err + (t_hi * _TWO_PI_LO + t_lo * _TWO_PI_HI))
    s_hi = np.sin(a_hi)
    c_hi = np.cos(a_hi)
    return c_hi - a_lo * s_hi, s_hi + a_lo * c_hi
