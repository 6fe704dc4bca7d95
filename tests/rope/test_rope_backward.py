"""RoPE's backward (reference/rope/backward.py, issue 15): the VJP f R_{-m} g against float64 central
differences and the exact mpmath VJP (golden correctly rounded, fast within the forward's bound), its
identities, and the mutants a conformance diagnosis grades against."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from reference import rope
from reference.golden.certify import nearest_double
from reference.identities import REGISTRY, run_identity
from reference.rope import backward, oracle

U = 2.0**-53
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
LINEAR = {"rope_type": "linear", "factor": 2.0}


def exact_vjp(forward_exact, g):
    """The exact VJP of a linear map acting on the last axis token by token: grad[..., e] =
    sum_j g[..., j] F(e_e)[..., j], F the oracle's exact forward (mpf object arrays), one basis
    vector per call (set in every token at once). Object array of mpf like g."""
    d = g.shape[-1]
    out = np.empty(g.shape, dtype=object)
    with mpmath.workprec(oracle.PREC_BITS):
        for e in range(d):
            basis = np.zeros(g.shape)
            basis[..., e] = 1.0
            col = forward_exact(basis)
            for idx in np.ndindex(g.shape[:-1]):
                out[idx + (e,)] = mpmath.fsum(mpmath.mpf(float(g[idx + (j,)])) * col[idx + (j,)] for j in range(d))
    return out


def central_difference_vjp(forward, x, g, h=0.125):
    """sum_j g_j (f(x + h e_e) - f(x - h e_e))_j / 2h for every e (float64, all tokens at once)."""
    out = np.empty(g.shape)
    for e in range(g.shape[-1]):
        step = np.zeros(x.shape)
        step[..., e] = h
        fd = (forward(x + step) - forward(x - step)) / (2 * h)
        out[..., e] = np.array([math.fsum(row) for row in (g * fd).reshape(-1, g.shape[-1])]).reshape(g.shape[:-1])
    return out


def fd_tolerance(x, g, h, amplitude=1.0):
    """Derived bound on |central_difference_vjp - exact VJP| per element, for a linear map with
    entries at most A (amplitude) in absolute value, computed within 7u A |pair| per element (RoPE's
    5u plus 2u for an amplitude). The central difference of a linear map has no truncation error; each
    output element of f(x +- h e) errs by at most 7u A (|x|_max + h) and the inputs x +- h e are rounded
    (u (|x|_max + h), times A), so the quotient errs by (2 * 7u + 2u) A (|x|_max + h) / 2h = 8u A
    (|x|_max + h) / h; the products with g and the fsum add 2u sum |g_j fd_j|."""
    xmax = np.max(np.abs(x), axis=-1, keepdims=True)
    gsum = np.sum(np.abs(g), axis=-1, keepdims=True)
    return 8 * U * amplitude * (xmax + h) / h * gsum * 1.01 + 2 * U * amplitude * gsum * (xmax + 1)


CASES = [
    # (head_dim, rotary_dim, base, layout, scaling, positions)
    (8, 8, 1e4, "half", None, [[0, 1, 4095], [7, 2**20 + 1, 2**24]]),
    (10, 6, 5e5, "interleaved", None, [[3, 2**11, 100], [2**16, 5, 9]]),
    (8, 8, 1e4, "half", YARN, [[0, 17, 8191], [1, 2, 3]]),
    (6, 4, 1e4, "interleaved", LINEAR, [[5, 4096, 12], [0, 1, 2**20]]),
]


@pytest.mark.parametrize("head_dim, rotary_dim, base, layout, scaling, positions", CASES)
def test_vjp_matches_central_differences(head_dim, rotary_dim, base, layout, scaling, positions):
    rng = np.random.default_rng(head_dim + rotary_dim)
    pos = np.array(positions)
    x = rng.standard_normal(pos.shape + (2, head_dim))
    g = rng.standard_normal(x.shape)
    kw = dict(rotary_dim=rotary_dim, base=base, layout=layout, scaling=scaling, backend="numpy")
    f = rope.frequencies(rotary_dim, base, scaling)[1]
    fd = central_difference_vjp(lambda v: rope.apply(v, pos, **kw), x, g)
    vjp = backward.apply_vjp(g, pos, **kw)
    tol = fd_tolerance(x, g, 0.125, max(f, 1.0))
    assert np.all(np.abs(fd - vjp) <= tol)
    # and the mutants are far outside it: the test can fail
    wrong = rope.apply(g, pos, **kw)
    assert np.max(np.abs(fd - wrong) - tol) > 0.1


@pytest.mark.parametrize("head_dim, rotary_dim, base, layout, scaling, positions", CASES)
def test_golden_is_the_correctly_rounded_exact_vjp(head_dim, rotary_dim, base, layout, scaling, positions):
    rng = np.random.default_rng(7 * head_dim + rotary_dim)
    pos = np.array(positions)
    g = rng.standard_normal(pos.shape + (1, head_dim))
    g[0, 0, 0, 0] = -0.0
    exact = exact_vjp(lambda basis: oracle.apply_exact(basis, pos, rotary_dim, base, layout, scaling=scaling), g)
    expected = np.array([nearest_double(v) for v in exact.ravel()]).reshape(g.shape)
    for be in ("cpu", "numpy"):
        kw = dict(rotary_dim=rotary_dim, base=base, layout=layout, scaling=scaling, backend=be)
        golden = backward.apply_vjp(g, pos, mode="golden", **kw)
        assert np.array_equal(golden, expected)
        fast = backward.apply_vjp(g, pos, **kw)
        # fast: the forward's bound at -m, 4 ulps of the pair's norm (1.5 more with a factor f)
        err = oracle.pair_ulp_error(fast, exact, g, rotary_dim, layout)
        f = rope.frequencies(rotary_dim, base, scaling)[1]
        assert np.max(err) <= (4.0 if scaling is None else 5.5) * max(f, 1.0)


def test_vjp_is_the_forward_at_minus_m_and_passes_the_tail():
    rng = np.random.default_rng(3)
    pos = rng.integers(-2**40, 2**40, (2, 5))
    g = rng.standard_normal((2, 5, 3, 20))
    for be in ("cpu", "numpy"):
        got = backward.apply_vjp(g, pos, rotary_dim=16, backend=be)
        assert np.array_equal(got, rope.apply(g, -pos, rotary_dim=16, backend=be))
        assert np.array_equal(got[..., 16:], g[..., 16:])
        # R_{-m} R_m x = x up to the rotations' rounding (RoPE's 7.1u per pair, twice)
        back = backward.apply_vjp(rope.apply(g, pos, rotary_dim=16, backend=be), pos, rotary_dim=16, backend=be)
        assert np.max(np.abs(back - g)) <= 15 * U * np.max(np.abs(g)) * 2
    assert np.array_equal(backward.apply_vjp(g, np.zeros((2, 5), np.int64)), g)  # R_0 = I exactly


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="^g:"):
        backward.apply_vjp(np.zeros((2, 3, 4)), np.zeros((2, 3), np.int64))
    with pytest.raises(ValueError, match="^g:"):
        backward.apply_vjp(np.zeros((1, 1, 1, 4), dtype=complex), np.zeros((1, 1), np.int64))
    with pytest.raises(ValueError, match="^positions:"):
        backward.apply_vjp(np.zeros((1, 2, 1, 4)), np.zeros((1, 3), np.int64))
    with pytest.raises(ValueError, match="^positions:"):
        backward.apply_vjp(np.zeros((1, 1, 1, 4)), np.array([[2**53 + 1]]))


def test_mutants_are_distinct_and_far_from_the_gradient():
    rng = np.random.default_rng(11)
    pos = np.array([[1, 5, 100, 4095]])
    g = rng.standard_normal((1, 4, 2, 12))
    for scaling in (None, YARN):
        kw = dict(rotary_dim=8, base=1e4, layout="half", scaling=scaling, seq_len=None)
        right = backward.apply_vjp(g, pos, **kw)
        cands = [(code, arr) for code, items in backward.mutants(g, pos, **kw).items() for _, arr in items]
        assert {c for c, _ in cands} == set(backward.MUTANT_CODES)
        for code, arr in cands:
            assert np.linalg.norm(arr - right) > 1e-3 * np.linalg.norm(right), code
            # a user returning exactly this mutant is closest to it among all candidates
            dist = [np.linalg.norm(arr - other) for _, other in cands]
            assert min(dist) == 0.0 and sorted(dist)[1] > 1e-3 * np.linalg.norm(right)


@pytest.mark.parametrize("identity", ["rope.backward-is-inverse-rotation", "rope.backward-scaled-inverse-rotation",
                                      "rope.backward-adjoint"])
def test_backward_identities_hold(identity):
    import reference.rope.identities  # noqa: F401  (registers the identities)

    result = run_identity(REGISTRY[identity])
    assert result["verdict"] == "holds", result


def test_adjoint_identity_sees_a_wrong_backward(monkeypatch):
    """Replace the VJP by the forward (the transposed mistake): the adjoint identity must fail."""
    import reference.rope.identities  # noqa: F401  (registers the identities)

    monkeypatch.setattr(backward, "apply_vjp", lambda g, m, **kw: rope.apply(g, m, **kw))
    result = run_identity(REGISTRY["rope.backward-adjoint"])
    assert result["verdict"] == "failing" and result["residual"] > 1e-3
