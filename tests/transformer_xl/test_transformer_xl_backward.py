"""The float64 backward of transformer_xl.score (reference/transformer_xl/backward.py): central
differences (exact for a bilinear map up to rounding), an mpmath VJP from the independent oracle,
the fast mode (numpy and cpu backends) within its bound, the adjoint identity, argument errors."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from reference import transformer_xl as xl
from reference.golden.certify import nearest_double
from reference.transformer_xl import backward, identities, oracle

U = 2.0**-53


def _inputs(qlen, mlen, n_head, d_head, d_model, seed):
    """Multiples of 2^-12 (q, k in [-2, 2], u, v in [-1, 1], W in [-1/2, 1/2]): x +- 2^-4 is exact."""
    rng = np.random.default_rng(seed)
    grid = lambda scale, shape: rng.integers(-4096, 4097, shape) * (scale / 4096)  # noqa: E731
    return (grid(2, (qlen, n_head, d_head)), grid(2, (qlen + mlen, n_head, d_head)), grid(1, (n_head, d_head)),
            grid(1, (n_head, d_head)), grid(0.5, (n_head * d_head, d_model)))


def _cotangent(x, seed):
    q, k = x[0], x[1]
    return np.random.default_rng(seed).uniform(-2, 2, (q.shape[1], q.shape[0], k.shape[0]))


@pytest.mark.parametrize("qlen, mlen, clamp", [(3, 0, 0), (2, 3, 0), (3, 3, 2)])
def test_central_differences_match_the_golden_gradient(qlen, mlen, clamp):
    """The score is a polynomial of degree 2 in all inputs together, so (f(x + h e) - f(x - h e)) / 2h
    is the directional derivative exactly; only the rounding of the two fast forwards (fast_bound each),
    of the products with G and the fsums (2u of their terms), of the difference (u) and golden's own
    faithful rounding (2u) separate it from the golden gradient."""
    x = _inputs(qlen, mlen, 2, 4, 8, seed=qlen * 10 + mlen)
    G = _cotangent(x, 3)
    kw = {"mlen": mlen, "d_model": 8, "clamp_len": clamp}
    golden = backward.score_vjp(G, *x, mode="golden", **kw)
    h = 2.0**-4
    for slot, role in enumerate(backward.ROLES):
        for idx in np.ndindex(x[slot].shape):
            sides = []
            tol = 0.0
            for sign in (1.0, -1.0):
                moved = [a.copy() for a in x]
                moved[slot][idx] += sign * h
                f = xl.score(*moved, backend="cpu", **kw)
                sides.append(math.fsum((G * f).reshape(-1).tolist()))
                tol += float(np.sum(np.abs(G) * (xl.fast_bound(*moved, **kw) + 2 * U * np.abs(f))))
            fd = (sides[0] - sides[1]) / (2 * h)
            want = golden[role][idx]
            tol = tol / (2 * h) + U * abs(fd) + 2 * U * abs(want)
            assert abs(fd - want) <= tol, (role, idx, fd, want, tol)
            assert tol < 1e-11 * max(1.0, abs(want))  # the check can tell a wrong gradient apart


def test_golden_equals_an_mpmath_vjp_from_the_oracle():
    """Exact gradient from the independent oracle: grad_e = sum G (F(x + e) - F(x - e)) / 2 at 200
    bits (a unit step is exact: F is quadratic); golden is its nearest double, bit for bit."""
    qlen, mlen, clamp = 2, 2, 2
    x = _inputs(qlen, mlen, 2, 2, 4, seed=7)
    G = _cotangent(x, 8)
    golden = backward.score_vjp(G, *x, mlen=mlen, d_model=4, clamp_len=clamp, mode="golden")
    with mpmath.workprec(200):
        Gm = [mpmath.mpf(float(g)) for g in G.reshape(-1)]
        for slot, role in enumerate(backward.ROLES):
            for idx in np.ndindex(x[slot].shape):
                sides = []
                for sign in (1.0, -1.0):
                    moved = [a.copy() for a in x]
                    moved[slot][idx] += sign
                    F = oracle.score_exact(*moved, mlen, 4, clamp).reshape(-1)
                    sides.append(mpmath.fsum(g * f for g, f in zip(Gm, F)))
                exact = (sides[0] - sides[1]) / 2
                assert golden[role][idx] == nearest_double(exact), (role, idx)


@pytest.mark.parametrize("qlen, mlen, clamp, masked", [(4, 0, 0, False), (3, 5, 0, False), (4, 4, 2, False),
                                                        (1, 7, 0, False), (3, 2, 0, True), (4, 3, 2, True)])
def test_fast_mode_within_its_bound(qlen, mlen, clamp, masked):
    """Every fast backend here (numpy, cpu; cuda in test_transformer_xl_cuda.py) within vjp_bound of
    golden: mlen 0 and > 0, with and without clamp_len, and with G zero on the masked keys j > i + mlen
    (as the conformance side passes it)."""
    x = _inputs(qlen, mlen, 3, 8, 16, seed=qlen + 5 * mlen)
    G = _cotangent(x, 9)
    if masked:
        G[:, xl.distances(qlen, mlen) < 0] = 0.0
    kw = {"mlen": mlen, "d_model": 16, "clamp_len": clamp}
    golden = backward.score_vjp(G, *x, mode="golden", **kw)
    bound = backward.vjp_bound(G, *x, **kw)
    for backend in ("numpy", "cpu"):
        fast = backward.score_vjp(G, *x, backend=backend, **kw)
        for role in backward.ROLES:
            assert fast[role].shape == x[backward.ROLES.index(role)].shape
            assert np.all(np.abs(fast[role] - golden[role]) <= bound[role]), (backend, role)
    for role in backward.ROLES:
        assert np.all(bound[role] <= 1e-12 * (1 + np.abs(golden[role]).max()))


def test_the_cpu_kernels_sum_the_pairs_of_each_distance():
    """A cotangent on the pairs of one distance only: the cpu gradient of W_r is within vjp_bound,
    and the same values on the pairs of the neighbouring distance (what a kernel grouping the pairs
    wrongly would sum) are far outside it. The grouping: qlen 4, mlen 3, clamp 2 has distances
    -3..1 on 1, 2, 3, 4, 4 pairs and the clamped 2 on the other 14, row-major within each."""
    qlen, mlen, clamp = 4, 3, 2
    x = _inputs(qlen, mlen, 2, 4, 8, seed=21)
    d = xl.distances(qlen, mlen, clamp)
    G = np.where(d == 1, _cotangent(x, 22), 0.0)
    kw = {"mlen": mlen, "d_model": 8, "clamp_len": clamp}
    cpu = backward.score_vjp(G, *x, backend="cpu", **kw)
    golden = backward.score_vjp(G, *x, mode="golden", **kw)
    bound = backward.vjp_bound(G, *x, **kw)
    assert np.all(np.abs(cpu["r_weight"] - golden["r_weight"]) <= bound["r_weight"])
    moved = np.zeros_like(G)
    moved[:, d == 0] = G[:, d == 1]  # 4 pairs each
    wrong = backward.score_vjp(moved, *x, backend="cpu", **kw)
    assert np.max(np.abs(wrong["r_weight"] - golden["r_weight"])) > 1e6 * np.max(bound["r_weight"])
    values, index = np.unique(d, return_inverse=True)
    pairs, starts = backward.pairs_by_distance(index.reshape(d.shape), values.size)
    assert values.tolist() == [-3, -2, -1, 0, 1, 2] and starts.tolist() == [0, 1, 3, 6, 10, 14, 28]
    assert pairs[:6].tolist() == [6, 5, 13, 4, 12, 20] and sorted(pairs.tolist()) == list(range(28))


def test_backend_is_checked_and_golden_ignores_it():
    x = _inputs(2, 1, 2, 4, 8, seed=1)
    G = _cotangent(x, 2)
    with pytest.raises(ValueError, match="^backend: must be one of cpu, cuda, numpy; got 'gpu'$"):
        backward.score_vjp(G, *x, mlen=1, d_model=8, backend="gpu")
    golden = backward.score_vjp(G, *x, mlen=1, d_model=8, mode="golden")
    other = backward.score_vjp(G, *x, mlen=1, d_model=8, backend="cuda", mode="golden")  # no GPU needed
    assert all(np.array_equal(golden[r], other[r]) for r in backward.ROLES)


def test_the_gradient_formula_on_one_entry():
    """A cotangent on one entry (h, i, j): grad_u = s k_j, grad_v = s r_t, grad_k_j = s (q_i + u)."""
    x = _inputs(2, 1, 2, 4, 8, seed=2)
    q, k, u, v, w = x
    G = np.zeros((2, 2, 3))
    G[1, 1, 0] = 1.0  # query 1, key 0: distance 2
    g = backward.score_vjp(G, *x, mlen=1, d_model=8, mode="golden")
    s = 0.5
    r = (xl.sinusoid([2], 8, mode="golden") @ w.T)[0, 4:8]
    assert np.allclose(g["u"][1], s * k[0, 1], rtol=1e-15, atol=0)
    assert np.allclose(g["v"][1], s * r, rtol=1e-14, atol=1e-16)
    assert np.allclose(g["k"][0, 1], s * (q[1, 1] + u[1]), rtol=1e-15, atol=0)
    assert not np.any(g["u"][0]) and not np.any(g["k"][1:])
    assert np.allclose(g["r_weight"][4:8], s * np.outer(q[1, 1] + v[1], xl.sinusoid([2], 8, mode="golden")[0]),
                       rtol=1e-14, atol=1e-16)


def test_the_adjoint_identity_holds_and_catches_a_wrong_gradient():
    assert identities.backward_adjoint() <= 1.0
    qlen, mlen, clamp = 3, 5, 0
    x = identities._inputs(qlen, mlen)
    d = identities._inputs(qlen, mlen, seed=99)
    G = np.random.default_rng(1).uniform(-2, 2, (2, qlen, qlen + mlen))
    kw = {"mlen": mlen, "d_model": 16, "clamp_len": clamp}
    grads = backward.score_vjp(G, *x, **kw)
    grads["r_weight"] = grads["r_weight"] * math.sqrt(8)  # the scale missing from one gradient
    lhs = math.fsum(float(p) for g, dx in zip(grads.values(), d) for p in (g * dx).reshape(-1))
    rhs = math.fsum((G * backward.score_jvp(*d, *x, **kw)).reshape(-1).tolist())
    n_t = np.unique(xl.distances(qlen, mlen, clamp)).size
    bound = identities.adjoint_count(qlen, mlen, 8, 16, n_t) * U * identities.adjoint_scale(G, *x, *d, mlen, 16, clamp)
    assert abs(lhs - rhs) > 1e6 * bound


def test_user_errors_name_the_argument():
    x = _inputs(2, 1, 2, 4, 8, seed=1)
    with pytest.raises(ValueError, match="^G:"):
        backward.score_vjp(np.zeros((2, 2, 2)), *x, mlen=1, d_model=8)
    with pytest.raises(ValueError, match="^G:"):
        backward.score_vjp(np.full((2, 2, 3), np.nan), *x, mlen=1, d_model=8)
    with pytest.raises(ValueError, match="^mode"):
        backward.score_vjp(np.zeros((2, 2, 3)), *x, mlen=1, d_model=8, mode="exact")
    with pytest.raises(ValueError, match="^k:"):
        backward.score_vjp(np.zeros((2, 2, 3)), *x, mlen=2, d_model=8)
