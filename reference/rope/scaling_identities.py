"""Identities of the RoPE scaling types (reference/rope/scaling/), registered with the RoPE ones.

Frequencies are compared as the reference returns them (each correctly rounded from its exact
value), or in mpmath where the statement is about the exact values (band edges, bounds). u =
2^-53. Each docstring gives the residual and why the bound holds.
"""

from __future__ import annotations

import mpmath
import numpy as np

from reference import rope
from reference.identities import register
from reference.numerics import scaling as scaling_types

U = 2.0 ** -53
R, BASE, L0 = 128, 1e4, 4096


def _freq(scaling, seq_len=None, r=R, base=BASE):
    return rope.frequencies(r, base, scaling, seq_len)


@register(id="rope.scaling-factor-one", bound=0.0,
          statement="every scaling type at factor 1 (LongRoPE: all factors 1; the length rule and "
          "dynamic NTK at seq_len <= L0) gives the default frequencies and attention factor 1; dynamic "
          "NTK past L0 does not, by design (its scale factor * l / L - (factor - 1) is l / L at factor 1)")
def factor_one() -> float:
    """Residual: max |inv_freq - default| and |attention_factor - 1| over the types. Bound 0: at
    factor 1 every formula reduces to theta_i exactly (theta / 1, b * 1**(r/(r-2)), a ramp between
    theta and theta / 1, get_mscale(1) = 1, sqrt(1 + ln 1 / ln L) = 1), and both sides are the same
    correctly rounded real. Dynamic NTK is checked at seq_len L0 only: past L0 HF's formula scales
    by l / L0 even at factor 1 (FORMULAS: the YaRN paper's s = max(1, l / L))."""
    default, _ = _freq(None)
    ones = [1.0] * (R // 2)
    cases = [({"rope_type": "linear", "factor": 1.0}, None), ({"rope_type": "ntk", "factor": 1.0}, None),
             ({"rope_type": "dynamic", "factor": 1.0, "original_max_position_embeddings": L0}, L0),
             ({"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": L0}, L0),
             ({"rope_type": "yarn", "factor": 1.0, "original_max_position_embeddings": L0}, None),
             ({"rope_type": "llama3", "factor": 1.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": L0}, None),
             ({"rope_type": "longrope", "short_factor": ones, "long_factor": ones,
               "original_max_position_embeddings": L0}, 2 * L0),
             ({"rope_type": "length", "original_max_position_embeddings": L0}, L0)]
    worst = 0.0
    for scaling, n in cases:
        inv, factor = _freq(scaling, n)
        worst = max(worst, float(np.max(np.abs(inv - default))), abs(factor - 1.0))
    return worst


@register(id="rope.linear-is-interpolation", bound=0.0,
          statement="linear scaling by s at position s k equals default RoPE at position k (cos and sin, "
          "golden mode; s = 2, 4, 8, k up to 2^20)")
def linear_is_interpolation() -> float:
    """Residual: max |cos_s(s k) - cos(k)|, same for sin. Bound 0: (theta_i / s)(s k) = theta_i k
    exactly, and golden mode returns the correctly rounded value of the same real."""
    ks = np.array([0, 1, 7, 1000, 4095, 2**20], dtype=np.int64)
    c0, s0 = rope.cos_sin(ks, R, BASE, mode="golden")
    worst = 0.0
    for s in (2, 4, 8):
        c, sn = rope.cos_sin(ks * s, R, BASE, scaling={"rope_type": "linear", "factor": float(s)}, mode="golden")
        worst = max(worst, float(np.max(np.abs(c - c0))), float(np.max(np.abs(sn - s0))))
    return worst


LLAMA31 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192}


@register(id="rope.llama3-bands", bound=0.0,
          statement="llama3 keeps the high frequencies (wavelength < L / high_freq_factor) and divides the "
          "low ones (wavelength > L / low_freq_factor) by the factor (Llama 3.1 at base 5e5)")
def llama3_bands() -> float:
    """Residual: max |theta'_i - theta_i| over the high band and |theta'_i - theta_i / 8| over the low
    band. Bound 0: both sides are correctly rounded, and dividing by 8 (a power of two) is exact."""
    default, _ = _freq(None, base=5e5)
    inv, _ = _freq(LLAMA31, base=5e5)
    wavelen = 2 * np.pi / default
    high = wavelen < 8192 / 4.0 * (1 - 1e-9)
    low = wavelen > 8192 / 1.0 * (1 + 1e-9)
    return max(float(np.max(np.abs(inv[high] - default[high]))), float(np.max(np.abs(inv[low] - default[low] / 8))))


@register(id="rope.llama3-continuity", bound=2.0 ** -150,
          statement="llama3's smooth band meets both others: at wavelength L / low_freq_factor it gives "
          "theta / factor, at L / high_freq_factor it gives theta (exact, 200 bits)")
def llama3_continuity() -> float:
    """Residual: the relative gap between the smooth formula and each neighbouring band at the band
    edges, in mpmath at 200 bits. Bound 2^-150: the formula is exact there (smooth = 0 and 1), so
    only the working precision's rounding (about 2^-195) remains."""
    mod = scaling_types.module("llama3")
    with mpmath.workprec(200):
        edges = [2 * mpmath.pi / (mpmath.mpf(8192) / mpmath.mpf(f)) for f in (1, 4)]
        inv, _ = mod.frequencies(edges, R, mpmath.mpf(5e5), dict(LLAMA31), None)
        gaps = [abs(inv[0] - edges[0] / 8) / edges[0], abs(inv[1] - edges[1]) / edges[1]]
        return float(max(gaps))


@register(id="rope.yarn-bounds", bound=2.0 ** -150,
          statement="YaRN's frequencies lie between theta / s and theta (s = 2..40, L = 2048..32768, both "
          "truncate settings; exact, 200 bits)")
def yarn_bounds() -> float:
    """Residual: the largest relative amount by which theta'_i leaves [theta_i / s, theta_i], in
    mpmath. Bound 2^-150: theta'_i is a convex combination of the two (ramp in [0, 1]), so only
    rounding at 200 bits remains."""
    worst = mpmath.mpf(0)
    with mpmath.workprec(200):
        for s in (2.0, 4.0, 10.0, 40.0):
            for big_l in (2048, 4096, 32768):
                for truncate in (True, False):
                    params = {"factor": s, "original_max_position_embeddings": big_l, "truncate": truncate}
                    inv, _ = scaling_types.exact("yarn", params, R, BASE, None)
                    theta, _ = scaling_types.exact("default", {}, R, BASE, None)
                    for t, y in zip(theta, inv):
                        worst = max(worst, (y - t) / t, (t / s - y) / t)
    return float(worst)


@register(id="rope.dynamic-continuity", bound=4.0 / 4096 + 4 * U,
          statement="dynamic NTK equals the default for seq_len <= L0 and moves by at most factor / L0 "
          "(relative) from seq_len L0 to L0 + 1 (factor 4, L0 4096)")
def dynamic_continuity() -> float:
    """Residual: max relative |theta'_i(L0 + 1) - theta'_i(L0)| / theta_i, plus max |theta'_i(l) -
    theta_i| for l <= L0 (which is 0). Bound s / L0 + 4u: theta'_i(L0 + 1) / theta'_i(L0) =
    q**(-2i/(r-2)) with q = 1 + s / L0, so the relative change is at most ln q <= s / L0; the two
    roundings add 2u each."""
    params = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": L0}
    default, _ = _freq(None)
    below = max(float(np.max(np.abs(_freq(params, n)[0] - default))) for n in (1, L0 // 2, L0))
    at, after = _freq(params, L0)[0], _freq(params, L0 + 1)[0]
    return below + float(np.max(np.abs(after - at) / at))


@register(id="rope.length-monotone", bound=0.0,
          statement="the length rule theta * min(1, L0 / L) never grows with L (L from 1 to 64 L0)")
def length_monotone() -> float:
    """Residual: the largest increase theta'_i(L_next) - theta'_i(L) over a grid of L. Bound 0: the
    exact values do not increase, and correct rounding is monotone."""
    params = {"rope_type": "length", "original_max_position_embeddings": L0}
    grid = [1, L0 // 2, L0, L0 + 1, 2 * L0, 4 * L0, 64 * L0]
    invs = [_freq(params, n)[0] for n in grid]
    return max(float(np.max(b - a)) for a, b in zip(invs, invs[1:]))
