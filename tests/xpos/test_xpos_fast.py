"""xPos fast mode on the cpu backend: the scale zeta_i^e in float64 (a double-double exponent, then
libm's exp; reference/xpos/cpu_kernels.py) within the documented REL_ERR = 2^-51 of the exact
value, mpmath where the kernel refuses (|e ln zeta_i| > 700), and apply = RoPE's fast rotation
times that scale, bit for bit."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from reference import rope, xpos
from reference.numerics import phase
from reference.numerics.layouts import pair_indices
from reference.xpos import core, cpu_kernels

U = 2.0**-53


def _check_scales(pos, r, scale_base, gamma, centre, sign):
    """Worst relative error (in u) of the normal fast scales; flagged entries must be exact."""
    factor = core._factor(r, scale_base, gamma, centre, sign)
    got = core.fast_scales(pos, r, scale_base, gamma, centre, sign, factor)
    _, flags = cpu_kernels.scales(pos, centre, scale_base, sign, *core._log_zeta(r, gamma))
    worst = 0.0
    with mpmath.workprec(200):
        for t, m in enumerate(pos.tolist()):
            for i in range(r // 2):
                exact = factor(200, m, i)
                if flags[t, i]:
                    assert got[t, i] == phase.to_double(exact)  # the golden path's rounding
                    continue
                assert math.isfinite(got[t, i]) and got[t, i] >= 2.0**-1022  # never subnormal unflagged
                worst = max(worst, float(abs(mpmath.mpf(got[t, i]) / exact - 1)) / U)
    return worst, int(flags.sum())


def test_fast_scale_is_within_the_documented_bound_over_the_whole_range():
    rng = np.random.default_rng(2212)
    worst, flagged = 0.0, 0
    cases = [(128, 512.0, 0.4, 0.0), (64, 512.0, 0.4, 300.5), (8, 3.3, 1e-3, -1e6), (256, 1e5, 3.7, 2.5),
             (4, 0.01, 0.4, 0.0), (16, 1.0, 0.01, 77.25)]
    for r, base, gamma, centre in cases:
        pos = np.concatenate([rng.integers(-5000, 5000, 24), rng.integers(-2**53, 2**53, 6),
                              rng.integers(-300000, 300000, 6), [0, 1, -1, 2**53, -(2**53)]])
        for sign in (1, -1):
            w, f = _check_scales(pos, r, base, gamma, centre, sign)
            worst, flagged = max(worst, w), flagged + f
    assert worst * U <= cpu_kernels.REL_ERR  # measured ~1.9 u; derivation 2.1 u; documented 4 u
    assert worst > 0.5 and flagged > 0  # both paths were exercised


def test_kernel_flags_what_it_cannot_bound():
    hi, lo = core._log_zeta(8, 0.4)
    pos = np.array([0, 5, 10**7, -(10**7), 2**53])
    out, flags = cpu_kernels.scales(pos, 0.0, 512.0, 1, hi, lo)
    assert flags[:2].sum() == 0 and flags[2:].all()  # |e ln zeta_i| >= 10^7 / 512 * 0.19 > 700
    assert out[0].tolist() == [1.0] * 4
    _, flags = cpu_kernels.scales(pos[:2], 0.0, 1e-310, 1, hi, lo)  # e overflows: refused, not wrong
    assert flags[1].all()


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_fast_apply_is_rope_times_the_fast_scale_bit_for_bit(layout):
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal((2, 4, 3, 12)), rng.standard_normal((2, 4, 3, 12))
    pos = np.array([[0, 3, 700, -9], [4096, 4096, 10**6, 5]])
    keep = (q.copy(), k.copy())
    qo, ko = xpos.apply(q, k, pos, rotary_dim=8, layout=layout, centre=3.0)
    first, second = pair_indices(8, layout)
    for got, x, sign in ((qo, q, 1), (ko, k, -1)):
        s = core.fast_scales(pos.reshape(-1), 8, 512.0, 0.4, 3.0, sign,
                             core._factor(8, 512.0, 0.4, 3.0, sign)).reshape(2, 4, 1, 4)
        want = rope.apply(x, pos, rotary_dim=8, layout=layout)
        want[..., first] *= s
        want[..., second] *= s
        assert got.tobytes() == want.tobytes()
    assert np.array_equal(q, keep[0]) and np.array_equal(k, keep[1])


def test_fast_apply_stays_close_to_golden_on_every_backend():
    rng = np.random.default_rng(9)
    q, k = rng.standard_normal((1, 3, 1, 8)), rng.standard_normal((1, 3, 1, 8))
    pos = np.array([[0, 77, 5000]])
    gq, gk = xpos.apply(q, k, pos, mode="golden")
    for backend in ("cpu", "numpy"):
        fq, fk = xpos.apply(q, k, pos, backend=backend)
        for f, g in ((fq, gq), (fk, gk)):
            pair = np.hypot(g[..., 0::2], g[..., 1::2]).repeat(2, axis=-1)
            assert np.all(np.abs(f - g) <= 12 * U * pair)  # RoPE's 4 pair-ulps, the scale's 4u, the product
