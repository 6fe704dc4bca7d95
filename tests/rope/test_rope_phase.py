"""reference.numerics.phase: frequency tables any family can use (table_from_mp, ladder,
cos_sin_table, rotate_table), their caching, validation, and the sizes chosen per table."""

import math

import mpmath
import numpy as np
import pytest

import reference.rope as R
from reference.numerics import phase
from reference.rope import oracle

BACKENDS = ("cpu", "numpy")


def _sinusoidal(d):
    """tensor2tensor's ladder 10000**(-i / (d/2 - 1)), i = 0..d/2-1 (get_timing_signal_1d)."""

    def values(prec):
        return [mpmath.mpf(10000) ** (-mpmath.mpf(i) / (d // 2 - 1)) for i in range(d // 2)]

    return values


def test_public_names():
    assert R.phase is phase
    for name in ("table_from_mp", "ladder", "cos_sin_table", "rotate_table", "FrequencyTable"):
        assert getattr(R, name) is getattr(phase, name) and name in R.__all__
    # rope.angles is still the plain product m * theta (a function, not a module)
    assert callable(R.angles) and R.angles(np.array([2]), np.array([0.5])).tolist() == [[1.0]]
    assert R.MODES == ("fast", "golden")


def test_custom_table_cos_sin_against_oracle():
    d = 64
    table = phase.table_from_mp(("test.sinusoidal", d), _sinusoidal(d))
    assert table.count == d // 2
    pos = np.array([0, 1, 4095, -77777, 2**31 + 5, 2**53], dtype=np.int64)
    with mpmath.workprec(300):
        thetas = [mpmath.mpf(10000) ** (-mpmath.mpf(i) / (d // 2 - 1)) for i in range(d // 2)]
        assert np.array_equal(table.hi, [float(t) for t in thetas])
        exact_c = [[mpmath.cos(int(m) * t) for t in thetas] for m in pos]
        exact_s = [[mpmath.sin(int(m) * t) for t in thetas] for m in pos]
        want_c = np.vectorize(oracle.nearest_double, otypes=[float])(np.array(exact_c, dtype=object))
        want_s = np.vectorize(oracle.nearest_double, otypes=[float])(np.array(exact_s, dtype=object))
    for backend in BACKENDS:
        c, s = phase.cos_sin_table(pos, table, backend=backend)
        assert oracle.ulp_error(c, exact_c).max() <= 1.5
        assert oracle.ulp_error(s, exact_s).max() <= 1.5
        cg, sg = phase.cos_sin_table(pos.reshape(2, 3), table, backend=backend, mode="golden")
        assert cg.shape == (2, 3, d // 2)
        assert np.array_equal(cg.reshape(6, -1), want_c) and np.array_equal(sg.reshape(6, -1), want_s)


def test_ladder_is_what_cos_sin_and_apply_use():
    table = R.ladder(16, 5e5)
    assert np.array_equal(table.hi, R.inv_freq(16, 5e5))
    assert R.ladder(16, 5e5) is table  # cached per (rotary_dim, base)
    pos = np.array([[3, -9, 2**40]])
    x = np.random.default_rng(0).standard_normal((1, 3, 2, 20))
    for backend in BACKENDS:
        for mode in ("fast", "golden"):
            c1, s1 = phase.cos_sin_table(pos, table, backend=backend, mode=mode)
            c2, s2 = R.cos_sin(pos, 16, 5e5, backend=backend, mode=mode)
            assert np.array_equal(c1, c2) and np.array_equal(s1, s2)
            for layout in ("half", "interleaved"):
                kw = dict(layout=layout, rotary_dim=16, backend=backend, mode=mode)
                a = phase.rotate_table(x, pos, table, **kw)
                b = R.apply(x, pos, base=5e5, **kw)
                assert np.array_equal(a, b)
                assert np.array_equal(a[..., 16:], x[..., 16:])


def test_rotate_table_with_a_custom_table_matches_rotate_pairs():
    d = 8
    table = phase.table_from_mp(("test.sinusoidal", d), _sinusoidal(d))
    x = np.random.default_rng(1).standard_normal((2, 2, 1, 10))
    pos = np.array([[1, 2], [300, -4]])
    c, s = phase.cos_sin_table(pos, table, backend="numpy")
    want = R.rotate_pairs(x, c, s, layout="interleaved", rotary_dim=8)
    got = phase.rotate_table(x, pos, table, layout="interleaved", rotary_dim=8, backend="numpy")
    assert np.array_equal(got, want)


def test_table_is_cached_per_key_and_read_only():
    calls = []

    def values(prec):
        calls.append(prec)
        return [mpmath.mpf(1) / 3, mpmath.mpf(2)]

    key = ("test.cache", 1)
    t1 = phase.table_from_mp(key, values)
    t2 = phase.table_from_mp(key, values)
    assert t1 is t2 and calls == [phase.PREC_BITS]
    for arr in (t1.hi, t1.lo, t1.limbs, t1.chunks, t1.min_gap):
        assert not arr.flags.writeable
        with pytest.raises(ValueError):
            arr[0] = 0
    # mp_values re-evaluates at the precision asked for (the golden fallback's source)
    with mpmath.workprec(1000):
        assert abs(t1.mp_values(1000)[0] - mpmath.mpf(1) / 3) < mpmath.mpf(2) ** -990


@pytest.mark.parametrize(
    "key, values, arg",
    [
        (["unhashable"], lambda p: [1], "key"),
        (("t", "nc"), [1, 2], "values"),
        (("t", "empty"), lambda p: [], "values"),
        (("t", "zero"), lambda p: [mpmath.mpf(0)], "values"),
        (("t", "neg"), lambda p: [mpmath.mpf(-1)], "values"),
        (("t", "big"), lambda p: [mpmath.mpf(2) ** 20 + 1], "values"),
        (("t", "small"), lambda p: [mpmath.mpf(2) ** -65], "values"),
        (("t", "nan"), lambda p: [mpmath.nan], "values"),
        (("t", "str"), lambda p: ["x"], "values"),
        (("t", "pi/4"), lambda p: [mpmath.pi / 4], "values"),  # m = 2: cos(pi/2) = 0 exactly
    ],
)
def test_table_from_mp_validation(key, values, arg):
    with pytest.raises(ValueError, match=f"^{arg}: ") as info:
        phase.table_from_mp(key, values)
    assert "\n" not in str(info.value)


def test_table_arguments_validated():
    table = R.ladder(8)
    x = np.zeros((1, 2, 1, 8))
    pos = np.zeros((1, 2), dtype=np.int64)
    with pytest.raises(ValueError, match="^table: "):
        phase.cos_sin_table(pos, "not a table")
    with pytest.raises(ValueError, match="^table: "):
        phase.rotate_table(x, pos, table, layout="half", rotary_dim=6)
    with pytest.raises(ValueError, match="^mode: "):
        phase.cos_sin_table(pos, table, mode="exact")
    with pytest.raises(ValueError, match="^positions: "):
        phase.cos_sin_table(np.array([2**53 + 1]), table)
    with pytest.raises(ValueError, match="^layout: "):
        phase.rotate_table(x, pos, table, layout="x")


def test_limits_at_the_edges_of_the_frequency_range():
    key = ("test.edges",)
    table = phase.table_from_mp(key, lambda p: [mpmath.mpf(2) ** 20, mpmath.mpf(2) ** -64])
    pos = np.array([1, -3, 2**53, 123456789012345], dtype=np.int64)
    with mpmath.workprec(400):
        thetas = table.mp_values(400)
        exact_c = [[mpmath.cos(int(m) * t) for t in thetas] for m in pos]
        exact_s = [[mpmath.sin(int(m) * t) for t in thetas] for m in pos]
    for backend in BACKENDS:
        c, s = phase.cos_sin_table(pos, table, backend=backend)
        assert oracle.ulp_error(c, exact_c).max() <= 1.5
        assert oracle.ulp_error(s, exact_s).max() <= 1.5
        cg, sg = phase.cos_sin_table(pos, table, backend=backend, mode="golden")
        for got, ex in ((cg, exact_c), (sg, exact_s)):
            want = np.vectorize(oracle.nearest_double, otypes=[float])(np.array(ex, dtype=object))
            assert np.array_equal(got, want)


def test_min_gap_is_the_smallest_distance_to_a_zero():
    # the continued-fraction minimum equals brute force over all m <= N (small N here)
    with mpmath.workprec(200):
        for theta in (mpmath.mpf(1), mpmath.mpf(10000) ** (-mpmath.mpf(6) / 64), mpmath.mpf("1e-3")):
            v = 2 * theta / mpmath.pi
            n = 20000
            brute = min(abs(m * v - mpmath.nint(m * v)) for m in range(1, n + 1))
            assert phase._min_gap(v, n) == brute


@pytest.mark.parametrize("rotary_dim, base", [(256, 1e6), (128, 1e4), (2, 1.0), (64, 2.0**64)])
def test_table_sizes_cover_the_worst_position(rotary_dim, base):
    # The stored 2 theta / pi is accurate enough that |m| times its error stays below 2**-116 of
    # the closest any |m| <= 2**53 gets to a zero (the table's own check, redone here).
    t = R.ladder(rotary_dim, base)
    assert phase.MIN_FRAC_LIMBS <= t.frac_limbs <= phase.MAX_FRAC_LIMBS
    assert t.limbs.shape == (rotary_dim // 2, 1 + t.frac_limbs) and t.limbs.dtype == np.uint64
    assert t.chunks.shape == (t.turn_chunks, rotary_dim // 2)
    with mpmath.workprec(800):
        for i, theta in enumerate(t.mp_values(800)):
            v = 2 * theta / mpmath.pi
            fixed = sum(int(x) * mpmath.mpf(2) ** (-32 * j) for j, x in enumerate(t.limbs[i]))
            chunks = sum(mpmath.mpf(float(c)) for c in t.chunks[:, i])
            gap = mpmath.mpf(t.min_gap[i])
            assert 0 <= v - fixed < mpmath.mpf(2) ** (-32 * t.frac_limbs)
            assert 2**53 * (v - fixed) <= gap * mpmath.mpf(2) ** -115
            assert 2**53 * abs(v - chunks) <= gap * mpmath.mpf(2) ** -116
            assert all(float(c) == 0 or math.frexp(abs(float(c)))[0] * 2**26 % 1 == 0 for c in t.chunks[:, i])
