"""Golden mode: every value is the float64 nearest to the exact real result.

Checked for bit equality against the mpmath oracle (oracle.nearest_double of a 200-bit value,
with the oracle's precision-raising rounding wherever they disagree), on thousands of sampled
values including values next to zeros of cos/sin, and on apply inputs chosen to cancel.
"""

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import reference.rope as R
from reference.numerics import phase
from reference.rope import accuracy, oracle

BACKENDS = ("cpu", "numpy")


# ---- the oracle's rounding helper ------------------------------------------------------------


def test_nearest_double_edge_cases():
    mpf = mpmath.mpf
    with mpmath.workprec(3000):
        one = mpf(1)
        u = mpf(2) ** -53
        assert oracle.nearest_double(one + u) == 1.0  # tie: to even
        assert oracle.nearest_double(one + 3 * u) == 1.0 + 2.0**-51  # tie: to even (up)
        assert oracle.nearest_double(one + u + mpf(2) ** -2000) == 1.0 + 2.0**-52
        assert oracle.nearest_double(-(one + u + mpf(2) ** -2000)) == -(1.0 + 2.0**-52)
        assert oracle.nearest_double(one - u / 2) == 1.0  # tie below a power of two: to even
        assert oracle.nearest_double(one - u / 2 - mpf(2) ** -2000) == 1.0 - 2.0**-53
        tiny = mpf(2) ** -1074
        assert oracle.nearest_double(tiny / 2) == 0.0  # tie between 0 and 2**-1074: to even
        assert oracle.nearest_double(tiny * 3 / 2) == 2.0**-1073  # tie: to even
        assert oracle.nearest_double(tiny * mpf("0.75")) == 2.0**-1074
        assert oracle.nearest_double(-tiny * mpf("0.25")) == 0.0
        # subnormal rounded once on the 2**-1074 grid (no double rounding)
        x = mpf(2) ** -1060 + tiny / 2 + mpf(2) ** -1200
        assert oracle.nearest_double(x) == 2.0**-1060 + 2.0**-1074
        assert oracle.nearest_double(mpf(0)) == 0.0
        big = mpf(2) ** 1024
        assert oracle.nearest_double(big) == math.inf
        assert oracle.nearest_double(-big) == -math.inf
        top = mpf(np.finfo(np.float64).max)
        half_ulp = mpf(2) ** 970
        assert oracle.nearest_double(top + half_ulp) == math.inf  # tie, odd mantissa: up
        assert oracle.nearest_double(top + half_ulp - 1) == float(top)
        assert oracle.nearest_double(mpf(0.1)) == 0.1


@given(st.floats(allow_nan=False, allow_infinity=False), st.integers(-3, 3))
def test_phase_rounding_agrees_with_the_oracle(x, k):
    # phase.to_double (the golden fallback) rounds independently of oracle.nearest_double
    with mpmath.workprec(2200):
        v = mpmath.mpf(x) + k * mpmath.mpf(2) ** (int(mpmath.mag(x) if x else -1074) - 54)
        assert phase.to_double(v) == oracle.nearest_double(v)


# ---- cos/sin --------------------------------------------------------------------------------


def test_golden_cos_sin_is_correctly_rounded_on_samples():
    res = accuracy.measure_cos_sin(
        configs=3, positions=30, pairs=12, max_position=2**53, seed=31, near_zero=18,
        golden=True,
    )
    assert res["samples"] >= 3000
    assert res["min_abs"] < 1e-12
    assert res["golden_mismatches"] == {"cpu": 0, "numpy": 0}, res


@pytest.mark.parametrize("rotary_dim, base", [(256, 1e6), (128, 1e4)])
def test_golden_cos_sin_next_to_zeros(rotary_dim, base):
    thetas = R.ladder(rotary_dim, base).mp_values(400)
    for i in (1, rotary_dim // 4, rotary_dim // 2 - 1):
        qs = oracle.near_zero_positions(thetas[i])[-5:]
        pos = np.array(qs + [-q for q in qs], dtype=np.int64)
        want_c, want_s = oracle.cos_sin_nearest(pos, rotary_dim, base, pairs=[i])
        for backend in BACKENDS:
            c, s = R.cos_sin(pos, rotary_dim, base, backend=backend, mode="golden")
            assert np.array_equal(c[:, i], want_c[:, 0]), backend
            assert np.array_equal(s[:, i], want_s[:, 0]), backend


def test_golden_cos_sin_exact_values_and_symmetry():
    pos = np.array([0, 5, -5, 2**53, -(2**53)])
    for backend in BACKENDS:
        c, s = R.cos_sin(pos, 8, 1e4, backend=backend, mode="golden")
        assert np.all(c[0] == 1.0) and np.all(s[0] == 0.0) and not np.signbit(s[0]).any()
        assert np.array_equal(c[1], c[2]) and np.array_equal(s[1], -s[2])
        assert np.array_equal(c[3], c[4]) and np.array_equal(s[3], -s[4])


def test_fallback_recomputes_flagged_values_exactly():
    # The rounding test almost never fails for cos/sin (about 2**-43 per value), so exercise the
    # host fallback directly: flagged entries of garbage tables come back correctly rounded.
    table = R.ladder(16, 1e6)
    pos = np.array([3, 987011947, -(2**52) - 1], dtype=np.int64)
    c = np.full((3, 8), 7.0)
    s = np.full((3, 8), 7.0)
    flags = np.zeros((3, 8), dtype=np.uint8)
    flags[:, ::3] = 3
    phase._fix_cos_sin(c, s, flags, pos, table)
    want_c, want_s = oracle.cos_sin_nearest(pos, 16, 1e6)
    assert np.array_equal(c[:, ::3], want_c[:, ::3]) and np.array_equal(s[:, ::3], want_s[:, ::3])
    assert np.all(c[:, 1::3] == 7.0)


# ---- apply ----------------------------------------------------------------------------------


def test_golden_apply_is_correctly_rounded_on_samples():
    res = accuracy.measure_apply(configs=3, tokens=4, heads=2, max_position=2**53, seed=32,
                                 golden=True)
    assert res["golden_mismatches"] == {"cpu": 0, "numpy": 0}, res


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_golden_apply_hard_inputs(layout):
    # cancellation (a, b) = (fl(sin), fl(cos)) makes a cos - b sin ~ 1e-17 of the pair norm;
    # tiny and huge inputs leave the range where double-double products are exact: all are
    # recomputed exactly by the host and must still be the nearest doubles.
    r, base = 12, 1e4
    rng = np.random.default_rng(4)
    pos = np.array([[7, -987011947, 4313905412640395]])
    c, s = R.cos_sin(pos, r, base, mode="golden")
    first, second = R.pair_indices(r, layout)
    x = rng.standard_normal((1, 3, 3, r + 2))
    x[0, :, 0, first] = s[0].T
    x[0, :, 0, second] = c[0].T
    x[0, :, 1, first[0]] = 1e-310  # subnormal input
    x[0, :, 1, first[1]] = 2.0**1000
    x[0, :, 1, second[1]] = -(2.0**1001)
    x[0, :, 1, first[2]] = 0.0
    x[0, :, 1, second[2]] = 0.0
    want = oracle.apply_nearest(x, pos, rotary_dim=r, base=base, layout=layout)
    for backend in BACKENDS:
        got = R.apply(x, pos, rotary_dim=r, base=base, layout=layout, backend=backend, mode="golden")
        assert np.array_equal(got, want), backend
        assert np.array_equal(got[..., r:], x[..., r:])


def test_golden_apply_nan_and_inf_propagate():
    x = np.ones((1, 2, 1, 4))
    x[0, 0, 0, 1] = np.nan
    x[0, 1, 0, 3] = np.inf
    for backend in BACKENDS:
        out = R.apply(x, np.array([[3, 4]]), backend=backend, layout="half", mode="golden")
        assert np.isnan(out[0, 0, 0, 1]) and np.isnan(out[0, 0, 0, 3])
        assert np.isfinite(out[0, 0, 0, [0, 2]]).all()
        assert not np.isfinite(out[0, 1, 0, [1, 3]]).all()


# ---- backends agree bit for bit ---------------------------------------------------------------

positions = st.one_of(
    st.integers(-(2**53), 2**53), st.integers(-(2**24), 2**24), st.sampled_from([0, 1, -1, 2**53])
)


@given(
    st.lists(positions, min_size=1, max_size=8),
    st.integers(1, 64).map(lambda k: 2 * k),
    st.floats(1.0, 1e7),
)
def test_cpu_and_numpy_golden_cos_sin_identical(pos, rotary_dim, base):
    pos = np.array(pos, dtype=np.int64)
    c1, s1 = R.cos_sin(pos, rotary_dim, base, backend="cpu", mode="golden")
    c2, s2 = R.cos_sin(pos, rotary_dim, base, backend="numpy", mode="golden")
    assert np.array_equal(c1, c2) and np.array_equal(s1, s2)


@given(st.integers(0, 2**32 - 1), st.sampled_from(["half", "interleaved"]), st.integers(1, 16))
def test_cpu_and_numpy_golden_apply_identical(seed, layout, half):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 2, 2 * half + 2)) * np.exp(rng.uniform(-30, 30))
    pos = rng.integers(-(2**53), 2**53, size=(2, 3))
    kw = dict(rotary_dim=2 * half, base=float(rng.uniform(1.0, 1e6)), layout=layout, mode="golden")
    a = R.apply(x, pos, backend="cpu", **kw)
    b = R.apply(x, pos, backend="numpy", **kw)
    assert np.array_equal(a, b)


@pytest.mark.slow
def test_golden_big_sweep():
    res = accuracy.measure_cos_sin(
        configs=20, positions=40, pairs=16, max_position=2**53, seed=33, near_zero=40,
        golden=True,
    )
    assert res["golden_mismatches"] == {"cpu": 0, "numpy": 0}, res
    res = accuracy.measure_apply(configs=12, tokens=6, heads=2, max_position=2**53, seed=34,
                                 golden=True)
    assert res["golden_mismatches"] == {"cpu": 0, "numpy": 0}, res
