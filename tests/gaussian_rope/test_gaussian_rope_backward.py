"""Gaussian-kernel RoPE's backward (reference/gaussian_rope/backward.py, issue 15): apply's VJP
K(m) R_{-m} g and the score form's (grad_q, grad_k), against central differences and the exact
mpmath VJP (golden correctly rounded; fast, on the numpy and cpu backends, within 64u of
sum_j |G_ij| K_ij |k_j| per element), the identities and the mutants. The cuda backend is tested
in test_gaussian_rope_cuda.py."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from reference import gaussian_rope
from reference.gaussian_rope import DOCUMENT_KERNEL as KERNEL
from reference.gaussian_rope import backward, oracle
from reference.golden.certify import nearest_double
from reference.identities import REGISTRY, run_identity

U = 2.0**-53
PREC = 200


def _nearest(exact):
    return np.array([nearest_double(v) for v in exact.ravel()]).reshape(exact.shape)


def test_apply_vjp_is_correctly_rounded_and_matches_differences():
    rng = np.random.default_rng(5)
    pos = np.array([[0, 3, 20, 100, 700]])
    g = rng.standard_normal((1, 5, 1, 6))
    exact = np.empty(g.shape, dtype=object)
    with mpmath.workprec(PREC):
        for e in range(6):
            basis = np.zeros(g.shape)
            basis[..., e] = 1.0
            col = oracle.apply_exact(basis, pos, 4, 1e4, "half", KERNEL, prec=PREC)
            for idx in np.ndindex(g.shape[:-1]):
                out = mpmath.fsum(mpmath.mpf(float(g[idx + (j,)])) * col[idx + (j,)] for j in range(6))
                exact[idx + (e,)] = out
    kw = dict(kernel=KERNEL, rotary_dim=4, layout="half")
    for be in ("cpu", "numpy"):
        assert np.array_equal(backward.apply_vjp(g, pos, mode="golden", backend=be, **kw), _nearest(exact))
    fast = backward.apply_vjp(g, pos, **kw)
    kern = gaussian_rope.kernel(pos, KERNEL)[:, :, None, None]
    ref = _nearest(exact)
    # fast: RoPE's 5u per element of the pair's norm plus 2u for K: 7u K |g|_max per element
    assert np.all(np.abs(fast - ref) <= 8 * U * kern * np.max(np.abs(g), axis=-1, keepdims=True) * 2 + 1e-320)
    # central differences (linear: no truncation; 16u K (|x| + h)/2h per output, times sum |g|)
    x = rng.standard_normal(g.shape)
    h = 0.125
    fd = np.empty(g.shape)
    for e in range(6):
        step = np.zeros(g.shape)
        step[..., e] = h
        diff = (gaussian_rope.apply(x + step, pos, **kw) - gaussian_rope.apply(x - step, pos, **kw)) / (2 * h)
        fd[..., e] = np.sum(g * diff, axis=-1)
    tol = 8 * U * kern * (np.max(np.abs(x)) + h) / h * np.sum(np.abs(g)) + 1e-300
    assert np.all(np.abs(fd - fast) <= tol)
    assert np.max(np.abs(fd - gaussian_rope.apply(g, pos, **kw))) > 1e-3  # the transposed mistake shows


def test_apply_vjp_is_the_forward_at_minus_m():
    rng = np.random.default_rng(6)
    pos = rng.integers(-800, 800, (2, 4))
    g = rng.standard_normal((2, 4, 2, 10))
    for mode in ("fast", "golden"):
        got = backward.apply_vjp(g, pos, kernel=KERNEL, rotary_dim=8, mode=mode, backend="numpy")
        assert np.array_equal(got, gaussian_rope.apply(g, -pos, kernel=KERNEL, rotary_dim=8, mode=mode,
                                                       backend="numpy"))


def _scales(G, q, k, qp, kp):
    """(sum_j |G_ij| K_ij |k_j|, sum_i |G_ij| K_ij |q_i|), shaped [b, s, h, 1] to broadcast over
    q's (k's) elements: the size of each gradient element's terms."""
    kern = gaussian_rope.kernel(kp[:, None, :] - qp[:, :, None], KERNEL)  # [b, sq, sk]
    w = np.abs(G) * kern[:, None]  # [b, h, sq, sk]
    scale_q = np.einsum("bhij,bjh->bih", w, np.linalg.norm(k, axis=-1))[..., None]
    scale_k = np.einsum("bhij,bih->bjh", w, np.linalg.norm(q, axis=-1))[..., None]
    return scale_q, scale_k


def _score_exact_vjp(G, q, k, qp, kp, r, layout):
    """(grad_q, grad_k) exactly: S is linear in q (k) with each S_ij depending on q_i (k_j) only, so
    grad_q[b, i, h, e] = sum_j G[b, h, i, j] S(basis_e, k)[b, h, i, j] and the same for k."""
    gq = np.empty(q.shape, dtype=object)
    gk = np.empty(k.shape, dtype=object)
    with mpmath.workprec(PREC):
        for e in range(q.shape[-1]):
            bq = np.zeros(q.shape)
            bq[..., e] = 1.0
            bk = np.zeros(k.shape)
            bk[..., e] = 1.0
            sq = oracle.score_exact(bq, k, qp, kp, r, 1e4, layout, KERNEL, prec=PREC)
            sk = oracle.score_exact(q, bk, qp, kp, r, 1e4, layout, KERNEL, prec=PREC)
            for b, i, h in np.ndindex(q.shape[:3]):
                gq[b, i, h, e] = mpmath.fsum(mpmath.mpf(float(G[b, h, i, j])) * sq[b, h, i, j]
                                             for j in range(k.shape[1]))
            for b, j, h in np.ndindex(k.shape[:3]):
                gk[b, j, h, e] = mpmath.fsum(mpmath.mpf(float(G[b, h, i, j])) * sk[b, h, i, j]
                                             for i in range(q.shape[1]))
    return gq, gk


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_score_vjp_golden_and_fast_against_the_exact_vjp(layout):
    rng = np.random.default_rng(8)
    q = rng.standard_normal((1, 2, 1, 6))
    k = rng.standard_normal((1, 3, 1, 6))
    qp, kp = np.array([[0, 9]]), np.array([[1, 4, 30]])
    G = rng.standard_normal((1, 1, 2, 3))
    eq, ek = _score_exact_vjp(G, q, k, qp, kp, 4, layout)
    gq, gk = backward.score_vjp(G, q, k, qp, kp, kernel=KERNEL, rotary_dim=4, layout=layout, mode="golden")
    assert np.array_equal(gq, _nearest(eq)) and np.array_equal(gk, _nearest(ek))
    bound_q, bound_k = backward.score_vjp_bound(G, q, k, qp, kp, kernel=KERNEL)
    for be in ("cpu", "numpy"):  # numpy last: its gradients are checked against differences below
        fq, fk = backward.score_vjp(G, q, k, qp, kp, kernel=KERNEL, rotary_dim=4, layout=layout, backend=be)
        assert np.all(np.abs(fq - _nearest(eq)) <= bound_q), be
        assert np.all(np.abs(fk - _nearest(ek)) <= bound_k), be
    # central differences in q and k (S is linear in each)
    h = 0.125
    for which in ("q", "k"):
        x = q if which == "q" else k
        fd = np.empty(x.shape)
        for e in range(6):
            step = np.zeros(x.shape)
            step[..., e] = h
            args = lambda s: (q + s, k) if which == "q" else (q, k + s)  # noqa: E731
            diff = (gaussian_rope.score(*args(step), qp, kp, kernel=KERNEL, rotary_dim=4, layout=layout)
                    - gaussian_rope.score(*args(-step), qp, kp, kernel=KERNEL, rotary_dim=4, layout=layout)) / (2 * h)
            diff = diff * G  # [b, h, sq, sk]
            fd[..., e] = (diff.sum(axis=3).transpose(0, 2, 1) if which == "q" else diff.sum(axis=2).transpose(0, 2, 1))
        got = fq if which == "q" else fk
        scale_q, scale_k = _scales(G, q, k, qp, kp)
        scale = scale_q if which == "q" else scale_k
        # each score errs by 20u K |x_i| |y_j| (two rotations, the dot, K); the difference quotient
        # of two of them (inputs within h) by 20u (|x| + h) / h times that scale
        assert np.all(np.abs(fd - got) <= 20 * U * (np.max(np.abs(x)) + h) / h * scale * 4)


def _score_cases():
    """(G, q, k, q_positions, k_positions, rotary_dim, layout): many keys where K is tiny, subnormal
    and 0, a causal mask (zero cotangents above the diagonal), ties (queries and keys at the same and at repeated positions, K = a1 + a2), a
    key so far that K underflows to 0, partial rotary with a tail, several heads and batch rows, no
    query, no key."""
    rng = np.random.default_rng(11)
    q, k = rng.standard_normal((2, 4, 2, 6)), rng.standard_normal((2, 5, 2, 6))
    G = rng.standard_normal((2, 2, 4, 5))
    qp, kp = np.array([[0, 1, 2, 3], [7, 7, 9, 40]]), np.array([[0, 1, 2, 3, 4], [7, 7, 8, 30, 850]])
    causal = G * (kp[:, None, None, :] <= qp[:, None, :, None])
    interleaved = rng.standard_normal((1, 3, 1, 8)), rng.standard_normal((1, 2, 1, 8))
    # 120 keys from distance 650 (K's exponent about -850, where exp's argument error would be
    # thousands of ulps) through K's subnormals (from about 760) to 0 (past 771)
    far = np.array([[0, 3]]), np.arange(650, 770)[None]
    return [
        (rng.standard_normal((1, 1, 2, 120)), rng.standard_normal((1, 2, 1, 4)), rng.standard_normal((1, 120, 1, 4)),
         *far, 4, "half"),
        (causal, q, k, qp, kp, 4, "half"),
        (G, q, k, qp, kp, 6, "interleaved"),
        (rng.standard_normal((1, 1, 3, 2)), *interleaved, np.array([[5, -3, 12]]), np.array([[5, 50]]), 8,
         "interleaved"),
        (np.zeros((2, 2, 0, 5)), q[:, :0], k, qp[:, :0], kp, 4, "half"),
        (np.zeros((2, 2, 4, 0)), q, k[:, :0], qp, kp[:, :0], 4, "half"),
    ]


@pytest.mark.parametrize("case", range(len(_score_cases())))
def test_score_vjp_cpu_and_numpy_within_the_fast_bound_of_golden(case):
    G, q, k, qp, kp, r, layout = _score_cases()[case]
    kw = dict(kernel=KERNEL, rotary_dim=r, layout=layout)
    gq, gk = backward.score_vjp(G, q, k, qp, kp, mode="golden", **kw)
    bound_q, bound_k = backward.score_vjp_bound(G, q, k, qp, kp, kernel=KERNEL)
    for be in ("cpu", "numpy"):
        fq, fk = backward.score_vjp(G, q, k, qp, kp, backend=be, **kw)
        assert fq.shape == q.shape and fk.shape == k.shape and fq.dtype == fk.dtype == np.float64
        assert np.all(np.abs(fq - gq) <= bound_q), be
        assert np.all(np.abs(fk - gk) <= bound_k), be
    if case == 1:  # causal: no query of row 0 sees its key 4 (position 4)
        assert np.all(fk[0, 4] == 0.0) and np.all(gk[0, 4] == 0.0)
    if case == 2:  # unmasked, but the key at 850 is past K's underflow from every query
        assert np.all(fk[1, 4] == 0.0) and np.all(gk[1, 4] == 0.0) and np.all(G[1, :, :, 4] != 0.0)


def test_score_vjp_golden_is_the_same_on_every_backend():
    G, q, k, qp, kp, r, layout = _score_cases()[2]
    kw = dict(kernel=KERNEL, rotary_dim=r, layout=layout, mode="golden")
    want = backward.score_vjp(G, q, k, qp, kp, **kw)
    for be in ("numpy", "cpu", "cuda"):  # golden runs on the host: "cuda" needs no GPU here
        got = backward.score_vjp(G, q, k, qp, kp, backend=be, **kw)
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want)), be


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="^g:"):
        backward.apply_vjp(np.zeros((1, 2, 4)), np.zeros((1, 2), np.int64), kernel=KERNEL)
    q = np.zeros((1, 2, 1, 4))
    with pytest.raises(ValueError, match="^G:"):
        backward.score_vjp(np.zeros((1, 1, 2, 3)), q, q, np.zeros((1, 2), np.int64), np.zeros((1, 2), np.int64),
                           kernel=KERNEL)
    pos = np.zeros((1, 2), np.int64)
    for mode in ("fast", "golden"):
        for bad in ("gpu", None, "NUMPY"):
            with pytest.raises(ValueError, match="^backend: must be one of cpu, cuda, numpy; got") as info:
                backward.score_vjp(np.zeros((1, 1, 2, 2)), q, q, pos, pos, kernel=KERNEL, mode=mode, backend=bad)
            assert "\n" not in str(info.value)


def test_mutants_are_distinct_and_far():
    rng = np.random.default_rng(9)
    pos = np.array([[1, 4, 9]])
    g = rng.standard_normal((1, 3, 2, 10))
    right = backward.apply_vjp(g, pos, kernel=KERNEL, rotary_dim=8)
    cands = [(c, a) for c, items in backward.mutants(g, pos, kernel=KERNEL, rotary_dim=8).items() for _, a in items]
    assert {c for c, _ in cands} == {"backward-transposed", "backward-layout", "backward-missing", "backward-scale"}
    for code, arr in cands:
        assert np.linalg.norm(arr - right) > 1e-3 * np.linalg.norm(right), code


@pytest.mark.parametrize("identity", ["gaussian_rope.backward-adjoint", "gaussian_rope.backward-score-adjoint"])
def test_backward_identities_hold(identity):
    import reference.gaussian_rope.identities  # noqa: F401

    result = run_identity(REGISTRY[identity])
    assert result["verdict"] == "holds", result
    assert math.isfinite(result["residual"])


def test_backward_identities_see_wrong_backwards(monkeypatch):
    import reference.gaussian_rope.identities  # noqa: F401

    monkeypatch.setattr(backward, "apply_vjp", lambda g, m, **kw: gaussian_rope.apply(g, m, **kw))
    assert run_identity(REGISTRY["gaussian_rope.backward-adjoint"])["verdict"] == "failing"
    real = backward.score_vjp
    monkeypatch.setattr(backward, "score_vjp", lambda *a, **kw: tuple(2 * v for v in real(*a, **kw)))
    assert run_identity(REGISTRY["gaussian_rope.backward-score-adjoint"])["verdict"] == "failing"
