"""FIRE's golden quick phase (issue 31): the MLP's exact piecewise-linear segments reproduce it, and
golden mode (quick phase, mpmath for the uncertain entries) equals the per-entry mpmath definition
(fire._golden_mp) bit for bit on stressing inputs: domain edges, zero and duplicate breakpoints,
c = 0, an overflowing |c| n, distances up to 2**40 (no table), thresholds between positions."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from reference.fire.bench import weights
from reference.numerics.bias import fire, fire_golden
from reference.numerics.bias.fire import _golden, _golden_mp, check_weights


def _w(seed, heads, hidden, scale=1.0, **kw):
    w = weights(np.random.default_rng(seed), heads, hidden)
    for role in ("W1", "b1", "W2", "b2"):
        w[role] = w[role] * scale
    w.update(kw)
    return check_weights(w)


def _stress():
    dup = _w(5, 3, 7)
    dup["W1"][1, 0] = 0.0  # a unit without breakpoint (always on: b1 > 0, or off)
    dup["b1"][1] = 0.25
    dup["b1"][2] = 0.0  # a breakpoint at x = 0
    dup["W1"][4, 0], dup["b1"][4] = dup["W1"][3, 0], dup["b1"][3]  # a duplicate breakpoint
    dup["W1"][5, 0], dup["b1"][5] = 2 * dup["W1"][3, 0], 2 * dup["b1"][3]  # same point, other weights
    edge = _w(6, 2, 5, scale=2.0**-190, c=2.0**-199)
    big = _w(7, 2, 5, scale=2.0**190, c=2.0**199)
    return [
        ("bench", _w(1, 4, 32), {}),
        ("duplicates", dup, {}),
        ("c-zero", _w(2, 2, 6, c=0.0), {}),
        ("negative-c-small-L", _w(3, 3, 8, c=-2.5, L_multiplier=0.01), {}),
        ("large-c-threshold", _w(4, 5, 16, c=1e5, L_multiplier=-3.0), {"eps": 1e-3, "init_L": 100.0}),
        ("tiny-weights-edge", edge, {"eps": 2.0**-199}),
        ("huge-weights-edge", big, {}),
        ("no-bias", _w(8, 2, 4, b1=np.zeros(4), b2=np.zeros(2)), {}),
    ]


POSITIONS = [(np.arange(24), np.arange(24)), (np.array([0, 5, 511, 512, 513, 2**40]), np.array([2**40, 3, 0, 512])),
             (np.array([7, 2**39, 2**40]), np.array([0, 2**40 - 1, 6]))]


@pytest.mark.parametrize("name,w,kw", _stress(), ids=[c[0] for c in _stress()])
def test_golden_equals_the_mpmath_definition(name, w, kw):
    init_L, eps = kw.get("init_L", fire.INIT_L), kw.get("eps", fire.EPS)
    assert fire_golden.in_domain(w, init_L, eps)
    for qp, kp in POSITIONS:
        got = _golden(w, qp, kp, init_L, eps)
        want = _golden_mp(w, qp, kp, init_L, eps)
        assert got.tobytes() == want.tobytes(), (name, qp, kp)


def test_outside_the_domain_golden_is_the_mpmath_path():
    for w in (_w(9, 2, 3, c=2.0**-201), _w(9, 2, 3, scale=2.0**210), _w(9, 2, 3, c=1e-310)):
        assert not fire_golden.in_domain(w, fire.INIT_L, fire.EPS)
    assert not fire_golden.in_domain(_w(9, 2, 3), fire.INIT_L, 1e-300)


def test_segments_reproduce_the_mlp_exactly():
    w = _stress()[1][1]
    t, A, B, P, Q = fire_golden.segments(w)
    assert np.all(np.diff(t[0]) >= 0) and t.shape[1] == 6  # unit 1 has W1 = 0
    w1, b1 = [Fraction(float(v)) for v in w["W1"][:, 0]], [Fraction(float(v)) for v in w["b1"]]
    bps = sorted(Fraction(float(h)) + Fraction(float(lo)) for h, lo in t.T)
    probes = [bps[0] - 1] + [(a + b) / 2 for a, b in itertools.pairwise(bps) if a != b] + [bps[-1] + 1]
    for x in probes:
        s = sum(1 for p in bps if p < x)
        act = [max(a * x + b, 0) for a, b in zip(w1, b1)]
        for h in range(w["W2"].shape[0]):
            exact = sum(Fraction(float(v)) * a for v, a in zip(w["W2"][h], act)) + Fraction(float(w["b2"][h]))
            piece = (Fraction(A[0, h, s]) + Fraction(A[1, h, s])) * x + Fraction(B[0, h, s]) + Fraction(B[1, h, s])
            assert abs(piece - exact) <= 2.0**-100 * (float(P[h]) * abs(float(x)) + float(Q[h]))


def test_uncertain_entries_take_the_mpmath_path():
    # c = 0: x = 0 and the output is B = b2 + W2 b1 = 1 + 2**-53, a midpoint between doubles,
    # which no error bound can certify: the quick phase leaves NaN, mpmath rounds it to even.
    w = check_weights({"c": 0.0, "L_multiplier": 1.0, "W1": np.zeros((1, 1)), "b1": np.array([2.0**-26]),
                       "W2": np.array([[2.0**-27]]), "b2": np.array([1.0])})
    qp, kp = np.arange(3), np.arange(4)
    out, bad = fire_golden.quick(w, qp, kp, fire.INIT_L, fire.EPS)
    assert bad.tolist() == [4, 4, 4] and np.all(np.isnan(out))
    got = _golden(w, qp, kp, fire.INIT_L, fire.EPS)
    assert got.tobytes() == _golden_mp(w, qp, kp, fire.INIT_L, fire.EPS).tobytes() and np.all(got == 1.0)


def test_large_cpu_fast_mode_takes_the_segments_within_its_bound():
    # from SEGMENT_MIN_WORK on, cpu fast mode is the quick phase without the rounding test (and
    # with a plain comparison against the breakpoints): within fast_bound, nearly always golden
    w = _w(11, 4, 32)
    qp = np.concatenate([np.arange(300), [600, 5000, 2**40]]).astype(np.int64)
    kp = np.arange(256, dtype=np.int64)
    assert 4 * qp.size * kp.size * 32 >= fire.SEGMENT_MIN_WORK
    fast = fire.bias(qp, kp, w)
    golden = fire.bias(qp, kp, w, mode="golden")
    assert np.all(np.abs(fast - golden) <= fire.fast_bound(qp, kp, w))
    assert np.mean(fast == golden) > 0.99
    small = fire.bias(qp[:8], kp[:8], w)  # below the threshold: the unit-by-unit kernel
    assert np.all(np.abs(small - golden[:, :8, :8]) <= fire.fast_bound(qp[:8], kp[:8], w))
