"""reference/rope/decay.py: the RoFormer long-term decay math, against independent computations."""

import cmath
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference import rope
from reference.rope import decay

# The curve for d = 128, base 1e4 to 2 decimals, as computed independently in plain numpy (the
# RoFormer bound, arXiv 2104.09864 sec. 3.4.3, evaluated pair by pair).
PUBLISHED = {0: 32.5, 1: 31.54, 10: 17.95, 50: 12.63, 100: 10.23, 250: 6.55, 1000: 4.47}


def _curve_by_pair_cosines(distance, rotary_dim, base):
    """(1/(r/2)) sum_j |S_j| in mpmath from |S_j|^2 = j + 2 sum_{k<l<j} cos(distance (theta_l - theta_k)).

    A different formula from the library's running complex sum, so it checks the whole chain.
    """
    with mpmath.workdps(30):
        half = rotary_dim // 2
        theta = [mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * i) / rotary_dim) for i in range(half)]
        total, square = mpmath.mpf(0), mpmath.mpf(0)
        for j in range(1, half + 1):
            l = j - 1  # S_j adds the term l = j - 1: |S_j|^2 = |S_{j-1}|^2 + 1 + 2 sum_{k<l} cos(...)
            square += 1 + 2 * mpmath.fsum(mpmath.cos(distance * (theta[l] - theta[k])) for k in range(l))
            total += mpmath.sqrt(square)
        return float(total / half)


@pytest.mark.parametrize("distance", sorted(PUBLISHED))
def test_curve_matches_an_independent_mpmath_sum_and_the_published_values(distance):
    value = float(decay.relative_upper_bound(distance, 128, 1e4))
    oracle = _curve_by_pair_cosines(distance, 128, 1e4)
    assert value == pytest.approx(oracle, rel=1e-14, abs=0)
    assert round(oracle, 2) == PUBLISHED[distance]


@pytest.mark.parametrize("distance, rotary_dim, base", [(3, 64, 1e4), (777, 128, 5e5), (2**20, 128, 1e4),
                                                        (123_457, 256, 1e6), (5, 2, 1e4)])
def test_curve_elsewhere_matches_mpmath(distance, rotary_dim, base):
    value = float(decay.relative_upper_bound(distance, rotary_dim, base))
    assert value == pytest.approx(_curve_by_pair_cosines(distance, rotary_dim, base), rel=1e-13, abs=0)


@given(st.integers(1, 256).map(lambda h: 2 * h), st.sampled_from([10.0, 1e4, 5e5, 1e6]))
def test_curve_at_distance_zero_is_exactly_mean_of_j(rotary_dim, base):
    half = rotary_dim // 2
    assert float(decay.relative_upper_bound(0, rotary_dim, base)) == (half + 1) / 2
    np.testing.assert_array_equal(decay.partial_sums(0, rotary_dim, base), np.arange(1, half + 1))


def test_curve_decays_over_the_published_distances():
    values = decay.relative_upper_bound(np.array(sorted(PUBLISHED)))
    assert np.all(np.diff(values) < 0)


@given(st.integers(-2**24, 2**24), st.sampled_from([(16, 1e4), (128, 1e4), (96, 1e6)]))
def test_negative_distance_conjugates_the_phases(distance, dim_base):
    rotary_dim, base = dim_base
    np.testing.assert_array_equal(decay.phases(-distance, rotary_dim, base),
                                  np.conj(decay.phases(distance, rotary_dim, base)))
    assert decay.relative_upper_bound(-distance, rotary_dim, base) == decay.relative_upper_bound(distance, rotary_dim, base)


@pytest.mark.parametrize("distance", [1, -37, 4095, 2**20 + 3, 2**24 - 1])
def test_phases_match_mpmath(distance):
    got = decay.phases(distance, 64, 1e4)
    with mpmath.workdps(40):
        want = [complex(mpmath.expj(distance * mpmath.power(10000, mpmath.mpf(-2 * i) / 64))) for i in range(32)]
    np.testing.assert_allclose(got, want, rtol=0, atol=4e-16)


def test_shapes_broadcast():
    distance = np.arange(6).reshape(2, 3)
    assert decay.phases(distance, 8).shape == (2, 3, 4)
    assert decay.partial_sums(distance, 8).shape == (2, 3, 4)
    assert decay.relative_upper_bound(distance, 8).shape == (2, 3)
    assert decay.relative_upper_bound(5).shape == ()
    h = np.ones((2, 3, 5, 4), complex)
    assert decay.phase_sum(h, distance[..., None], 8).shape == (2, 3, 5)
    assert decay.abel_bound(h, distance[..., None], 8).shape == (2, 3, 5)


def test_hand_worked_two_pair_example():
    # r = 4, base = 100: theta = (1, 1/10). Distance 10: phases e^{10i}, e^{i}.
    h = np.array([2 - 1j, 0.5 + 3j])
    e0, e1 = cmath.exp(10j), cmath.exp(1j)
    s1, s2 = e0, e0 + e1
    assert decay.phase_sum(h, 10, 4, 100.0) == pytest.approx(h[0] * e0 + h[1] * e1, abs=1e-15)
    # Abel: -(S_1 (h_1 - h_0) + S_2 (0 - h_1))
    assert decay.abel_sum(h, 10, 4, 100.0) == pytest.approx(-(s1 * (h[1] - h[0]) + s2 * (0 - h[1])), abs=1e-15)
    step = max(abs(h[1] - h[0]), abs(h[1]))
    assert decay.abel_bound(h, 10, 4, 100.0) == pytest.approx(step * (abs(s1) + abs(s2)), rel=1e-15)


@given(st.integers(0, 2**24), st.integers(-2**20, 2**20), st.integers(0, 2**32 - 1))
def test_score_is_the_real_part_of_the_phase_sum_and_obeys_the_bound(n, shift, seed):
    rng = np.random.default_rng(seed)
    m = abs(n + shift)
    q, k = rng.standard_normal((2, 64))
    rotate = lambda v, p: rope.apply(v.reshape(1, 1, 1, 64), np.array([[p]]), layout="interleaved").reshape(64)
    score = math.fsum(rotate(q, m) * rotate(k, n))
    h = decay.score_coefficients(q, k)
    scale = np.linalg.norm(q) * np.linalg.norm(k)
    assert abs(score - decay.phase_sum(h, m - n, 64).real) <= 1e-14 * scale
    assert abs(score) <= decay.abel_bound(h, m - n, 64) * (1 + 1e-14)


def test_score_coefficients_pair_interleaved_elements():
    q = np.array([1.0, 2.0, 3.0, 4.0])
    k = np.array([5.0, 6.0, 7.0, 8.0])
    np.testing.assert_array_equal(decay.score_coefficients(q, k), [(1 + 2j) * (5 - 6j), (3 + 4j) * (7 - 8j)])


@pytest.mark.parametrize("call, argument", [
    (lambda: decay.relative_upper_bound(1.5), "distance"),
    (lambda: decay.relative_upper_bound(np.nan), "distance"),
    (lambda: decay.relative_upper_bound(3, 7), "rotary_dim"),
    (lambda: decay.relative_upper_bound(3, 0), "rotary_dim"),
    (lambda: decay.relative_upper_bound(3, 8, -1.0), "base"),
    (lambda: decay.phase_sum(np.ones(3), 3, 8), "h"),
    (lambda: decay.abel_bound(np.ones((2, 5)), 3, 8), "h"),
    (lambda: decay.score_coefficients(np.ones(4), np.ones(6)), "k"),
])
def test_bad_input_names_the_argument(call, argument):
    with pytest.raises(ValueError, match=f"^{argument}: "):
        call()


def test_integer_valued_float_distances_are_accepted():
    assert decay.relative_upper_bound(10.0) == decay.relative_upper_bound(10)
