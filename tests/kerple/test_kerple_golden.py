"""KERPLE's golden quick phase (issue 31): the double-double log1p/exp it rests on are within their
stated bounds, and every value the quick phase certifies equals the mpmath definition
(kerple.golden_value) on stressing inputs; flagged values take that path, so golden mode equals
it everywhere."""

from __future__ import annotations

import mpmath
import numba
import numpy as np
import pytest

from reference import kerple
from reference.numerics.bias import dd_elementary, golden_table, kerple_golden
from reference.numerics.bias.kerple import clamp, golden_value


@numba.njit(cache=False)
def _log1p(w):
    out = np.empty((2, w.size))
    for t in range(w.size):
        out[0, t], out[1, t] = dd_elementary.log1p_dd(w[t], 0.0)
    return out


@numba.njit(cache=False)
def _exp(y):
    out = np.empty((2, y.size))
    for t in range(y.size):
        out[0, t], out[1, t] = dd_elementary.exp_dd(y[t], 0.0)
    return out


def _worst(values, pairs, fn):
    worst = 0.0
    with mpmath.workprec(300):
        for v, h, lo in zip(values, pairs[0], pairs[1]):
            exact = fn(mpmath.mpf(float(v)))
            if exact == 0:
                assert h == 0.0 and lo == 0.0
                continue
            worst = max(worst, float(abs((mpmath.mpf(float(h)) + float(lo) - exact) / exact)))
    return worst


def test_log1p_and_exp_within_their_bounds():
    rng = np.random.default_rng(31)
    w = np.concatenate([rng.uniform(0, 1, 400), 2.0 ** rng.uniform(-200, 999.9, 400),
                        [0.0, 2.0**-1000, 1.0, 0.015625, 1 - 2.0**-53, 2.0**40 - 1, 2.0**999]])
    assert _worst(w, _log1p(w), mpmath.log1p) < dd_elementary.LOG1P_REL_ERR
    y = np.concatenate([rng.uniform(0, 60, 300), rng.uniform(0, 700, 300), [0.0, 2.0**-60, 700.0]])
    assert _worst(y, _exp(y), mpmath.exp) < dd_elementary.EXP_REL_ERR


CASES = [  # (variant, r1, r2): the bench's heads, clamps, exact cases, near-overflow parameters
    ("log", [0.5, 1.0, 2.0, 4.0], [0.25, 0.5, 1.0, 1.5]),
    ("log", [1e-9, 2.0**899, 2.0**901, 1.7e308], [1e-9, 2.0**949, 2.0**948.5, 1.0]),
    ("log", [3.3], [2.0**-6.6]),
    ("power", [0.5, 1.0, 2.0, 4.0], [0.25, 0.5, 1.0, 1.5]),
    ("power", [1.0, 1 + 2.0**-52, 3.0, 2.0**899, 2.0**901], [2.0, 1.0, 2.0, 1.999, 0.5]),
    ("power", [0.7, 1e-9, 1.0], [2.0**-7, 5.0, 1e-300]),
]
DISTANCES = np.concatenate([np.arange(0, 300), 2 ** np.arange(9, 41), 2 ** np.arange(9, 41) - 1,
                            [67108863, 67108864, 67108865, 3**25]]).astype(np.int64)


@pytest.mark.parametrize("variant,r1,r2", CASES)
def test_quick_phase_equals_the_mpmath_definition(variant, r1, r2):
    a, b = clamp(variant, r1, r2)
    values, flags = kerple_golden.quick(a, b, DISTANCES, variant == "log")
    in_domain = ((a[:, None] < 2.0**900) & ((b[:, None] * DISTANCES < 2.0**990) | (variant == "power"))) | (DISTANCES == 0)
    for h in range(a.size):
        for t, d in enumerate(DISTANCES.tolist()):
            want = golden_value(variant, a[h], b[h], d)
            if flags[h, t] == 0:
                assert values[h, t] == want and np.signbit(values[h, t]) == np.signbit(want), (h, d)
    assert not np.any(flags[~in_domain] == 0)  # never certified outside the domain (d = 0 is exact)
    assert np.mean(flags[in_domain]) < 0.01  # inside it, the quick phase does the work


def test_out_of_domain_entries_are_flagged():
    a, b = clamp("log", [2.0**901, 1.0], [1.0, 2.0**995])
    _, flags = kerple_golden.quick(a, b, np.array([1, 2]), True)
    assert flags.tolist() == [[1, 1], [1, 1]]


@pytest.mark.parametrize("variant", ["log", "power"])
def test_golden_mode_equals_the_definition_dense_and_sparse(variant):
    r1, r2 = [0.37, 1.21, 2.0**901], [0.43, 2.0, 1.0]
    a, b = clamp(variant, r1, r2)
    for qp, kp in [(np.arange(40), np.arange(3, 30)), (np.array([0, 2**40, 7]), np.array([2**40, 5, 0, 2**39]))]:
        got = kerple.bias(qp, kp, variant, r1, r2, mode="golden")
        d = np.abs(qp[:, None] - kp[None, :])
        want = np.array([[[golden_value(variant, a[h], b[h], int(v)) for v in row] for row in d] for h in range(3)])
        assert got.tobytes() == want.tobytes()
    assert golden_table.distances(np.array([0, 2**40]), np.array([0]), False)[1][0] == "sparse"
