"""Sinusoidal table identities, checked on the reference (``posref identities``).

Every check draws positions from a generator seeded by the identity's id, for the four 1-D
variants (interleaved and concatenated, each frequency rule, base 1e4) at d_model 64, and looks
``reference.sinusoidal.table`` up at call time so that a replaced function is what gets checked.

The pair (sin(p w_i), cos(p w_i)) is the unit vector at angle p w_i, so moving by k turns it by
k w_i: PE(p + k) = T_k PE(p) with T_k block-diagonal 2x2 rotations by k w_i, whatever p
(Vaswani et al. 2017, sec. 3.5: "PE_(pos+k) can be represented as a linear function of
PE_pos"). The reference is within 1 ulp per value (golden mode: 0.5), so every residual below is
a few u = 2**-53 times the size of the quantities involved: the bounds are derived per check.
"""

from __future__ import annotations

import zlib

import numpy as np

from reference import sinusoidal
from reference.identities import register
from reference.numerics import sinusoid_layouts as layouts

D = 64
VARIANTS = (("interleaved", "2i/d"), ("interleaved", "2i/(d-2)"), ("concatenated", "2i/d"),
            ("concatenated", "2i/(d-2)"))
MAX_POSITION = 2**20
U = 2.0**-53


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _pairs(rows, layout):
    """(sin, cos) [..., n] of rows [..., D]."""
    freq, kind = layouts.columns(rows.shape[-1], layout)
    n = int(freq.max()) + 1
    s = np.zeros(rows.shape[:-1] + (n,))
    c = np.zeros(rows.shape[:-1] + (n,))
    s[..., freq[kind == layouts.SIN]] = rows[..., kind == layouts.SIN]
    c[..., freq[kind == layouts.COS]] = rows[..., kind == layouts.COS]
    return s, c


def _rotate(s, c, ks, kc):
    """The pair (s, c) at angle a turned by the angle b of (ks, kc): (sin(a+b), cos(a+b))."""
    return s * kc + c * ks, c * kc - s * ks


def _table(pos, layout, exponent, mode="fast"):
    return sinusoidal.table(np.asarray(pos, dtype=np.int64), D, layout=layout, exponent=exponent,
                            mode=mode)


@register(id="sinusoidal.shift-is-rotation", bound=8 * U,
          statement="PE(p + k) = T_k PE(p), T_k the rotations by k w_i read off PE(k), independent of p "
                    "(p, k up to 2**20)")
def shift_is_rotation() -> float:
    """Residual: max |PE(p + k) - T_k PE(p)| over random p, k in [0, 2**20] (and k negative).

    Bound 8u: every value is within 1 ulp of the exact one, and ulp(v) <= u for |v| < 1 (cos 0 = 1
    is exact). s_p c_k + c_p s_k then errs by at most u(|s_p| + |c_p| + |s_k| + |c_k|) <= 2 sqrt(2) u
    from its inputs, u(|s_p c_k| + |c_p s_k|) <= u from the products (Cauchy-Schwarz) and u(1 + 3u)
    from the sum; PE(p + k) itself by u: under 6u (the cosine alike).
    """
    rng = _rng("sinusoidal.shift-is-rotation")
    worst = 0.0
    for layout, exponent in VARIANTS:
        p = rng.integers(0, MAX_POSITION, size=64)
        k = rng.integers(-MAX_POSITION // 2, MAX_POSITION, size=64)
        s_pk, c_pk = _pairs(_table(p + k, layout, exponent), layout)
        s_p, c_p = _pairs(_table(p, layout, exponent), layout)
        s_k, c_k = _pairs(_table(k, layout, exponent), layout)
        s_r, c_r = _rotate(s_p, c_p, s_k, c_k)
        worst = max(worst, float(np.max(np.abs(s_r - s_pk))), float(np.max(np.abs(c_r - c_pk))))
    return worst


@register(id="sinusoidal.shift-composes", bound=8 * U,
          statement="T_k T_l = T_(k+l) and T_(-k) = T_k^T (rotations read off PE(k), PE(l), PE(k+l), PE(-k))")
def shift_composes() -> float:
    """Residual: the larger of max |T_k T_l - T_(k+l)| (as the rotated pair (sin, cos) of the
    angle sum) and max |T_(-k) - T_k^T| (sin(-a) = -sin a, cos(-a) = cos a), entries of 2x2
    blocks, for random k, l in [-2**20, 2**20].

    Bound 8u: the error budget of shift-is-rotation (under 6u); T_(-k) = T_k^T is exact for a
    reference whose sine is odd and cosine even, as exact reduction makes it.
    """
    rng = _rng("sinusoidal.shift-composes")
    worst = 0.0
    for layout, exponent in VARIANTS:
        k = rng.integers(-MAX_POSITION, MAX_POSITION, size=64)
        l = rng.integers(-MAX_POSITION, MAX_POSITION, size=64)  # noqa: E741
        s_k, c_k = _pairs(_table(k, layout, exponent), layout)
        s_l, c_l = _pairs(_table(l, layout, exponent), layout)
        s_kl, c_kl = _pairs(_table(k + l, layout, exponent), layout)
        s_r, c_r = _rotate(s_k, c_k, s_l, c_l)
        worst = max(worst, float(np.max(np.abs(s_r - s_kl))), float(np.max(np.abs(c_r - c_kl))))
        s_m, c_m = _pairs(_table(-k, layout, exponent), layout)
        worst = max(worst, float(np.max(np.abs(s_m + s_k))), float(np.max(np.abs(c_m - c_k))))
    return worst


@register(id="sinusoidal.unit-pairs", bound=6 * U,
          statement="sin^2 + cos^2 = 1 for every pair of every row (the zero pad of odd d_model excluded)")
def unit_pairs() -> float:
    """Residual: max |sin^2 + cos^2 - 1| over random positions up to 2**20, d_model 64 and 63.

    Bound 6u: values within 1 ulp (<= u absolute) move s^2 + c^2 by at most 2u(|s| + |c|) + 2u^2
    <= 2 sqrt(2) u + 2u^2; rounding the squares adds u(s^2 + c^2) <= u(1 + 3u) and the sum u(1 +
    4u): under 5u.
    """
    rng = _rng("sinusoidal.unit-pairs")
    worst = 0.0
    for layout, exponent in VARIANTS:
        pos = rng.integers(-MAX_POSITION, MAX_POSITION, size=128)
        s, c = _pairs(_table(pos, layout, exponent), layout)
        worst = max(worst, float(np.max(np.abs(s * s + c * c - 1.0))))
    return worst


@register(id="sinusoidal.dot-product", bound=D * D * U,
          statement="<PE(p), PE(p + k)> = sum_i cos(k w_i): the dot product depends on k only")
def dot_product() -> float:
    """Residual: max over random p, k (up to 2**20) of |<PE(p), PE(p + k)> - sum_i cos(k w_i)|,
    with cos(k w_i) read from the reference's own PE(k) (for odd d_model the interleaved layout's
    last sine has no cosine: that variant is checked at even d only).

    Bound D^2 u: the D products a_j b_j have sum of magnitudes at most D/2 (each pair's
    |s s'| + |c c'| <= 1, Cauchy-Schwarz); inputs within u absolute move them by at most
    2u * D/2 ... (|a| + |b| per term) <= 2 sqrt(2) u D/2, rounding the products by u D/2, and the
    recursive sum of D terms by at most (D - 1) u D/2 (Higham, "Accuracy and Stability", eq. 4.4).
    The right side: D/2 values within u and a sum of D/2 terms, (D/2) u + (D/2 - 1) u (D/2). In all
    below D^2 u / 2 + 3 D u, so under D^2 u for D = 64.
    """
    rng = _rng("sinusoidal.dot-product")
    worst = 0.0
    for layout, exponent in VARIANTS:
        p = rng.integers(-MAX_POSITION, MAX_POSITION, size=32)
        k = rng.integers(-MAX_POSITION, MAX_POSITION, size=32)
        a, b = _table(p, layout, exponent), _table(p + k, layout, exponent)
        _, c_k = _pairs(_table(k, layout, exponent), layout)
        lhs = np.sum(a * b, axis=-1)
        worst = max(worst, float(np.max(np.abs(lhs - c_k.sum(axis=-1)))))
    return worst


@register(id="sinusoidal.backends-agree", bound=0.0,
          statement="golden tables are identical on the cpu and numpy backends (both correctly rounded)")
def backends_agree() -> float:
    """Residual: the number of values whose bits differ between the cpu and numpy backends in
    golden mode, for every variant, d_model 64 and 63 and positions up to 2**53.

    Bound 0: each golden value is the nearest double to the same exact real. (numba.cuda is
    checked the same way by tests/sinusoidal under the simulator.)
    """
    rng = _rng("sinusoidal.backends-agree")
    differ = 0
    for layout, exponent in VARIANTS:
        pos = np.concatenate([rng.integers(-(2**53), 2**53, size=16), np.arange(8)])
        for d in (64, 63):
            kw = dict(layout=layout, exponent=exponent, mode="golden")
            a = sinusoidal.table(pos, d, backend="cpu", **kw)
            b = sinusoidal.table(pos, d, backend="numpy", **kw)
            differ += int(np.count_nonzero(a.view(np.int64) != b.view(np.int64)))
    return float(differ)
