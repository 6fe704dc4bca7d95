"""xPos's backward (reference/xpos/backward.py, issue 15): grad_q = s R_{-m} g_q and grad_k =
s^-1 R_{-m} g_k against central differences and the exact mpmath VJP, the identity and the mutants."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from reference import xpos
from reference.golden.certify import nearest_double
from reference.identities import REGISTRY, run_identity
from reference.xpos import backward, oracle

U = 2.0**-53
PREC = 200


def _nearest(exact):
    return np.array([nearest_double(v) for v in exact.ravel()]).reshape(exact.shape)


def _exact_vjp(g_q, g_k, pos, r, layout, centre):
    """Exact (grad_q, grad_k): <g, F(basis_e)> per token, F the oracle's exact forward for q (k)."""
    out = [np.empty(g_q.shape, dtype=object), np.empty(g_k.shape, dtype=object)]
    d = g_q.shape[-1]
    with mpmath.workprec(PREC):
        for e in range(d):
            basis = np.zeros(g_q.shape)
            basis[..., e] = 1.0
            cols = oracle.apply_exact(basis, basis, pos, r, 1e4, layout, 512.0, 0.4, centre, prec=PREC)
            for which, g in enumerate((g_q, g_k)):
                for idx in np.ndindex(g.shape[:-1]):
                    out[which][idx + (e,)] = mpmath.fsum(mpmath.mpf(float(g[idx + (j,)])) * cols[which][idx + (j,)]
                                                         for j in range(d))
    return out


@pytest.mark.parametrize("layout, centre", [("interleaved", 0.0), ("half", 300.0)])
def test_golden_is_correctly_rounded_and_fast_is_close(layout, centre):
    rng = np.random.default_rng(12)
    pos = np.array([[0, 5, 511, 4096]])
    gq, gk = rng.standard_normal((1, 4, 1, 6)), rng.standard_normal((1, 4, 1, 6))
    eq, ek = _exact_vjp(gq, gk, pos, 4, layout, centre)
    kw = dict(rotary_dim=4, layout=layout, centre=centre)
    for be in ("cpu", "numpy"):
        got_q, got_k = backward.apply_vjp(gq, gk, pos, mode="golden", backend=be, **kw)
        assert np.array_equal(got_q, _nearest(eq)) and np.array_equal(got_k, _nearest(ek))
    fq, fk = backward.apply_vjp(gq, gk, pos, **kw)
    for fast, ex in ((fq, eq), (fk, ek)):
        ref = _nearest(ex)
        # 7u s |pair| per element (RoPE's 5u, the scale rounded and applied): within 8u |ref|_pair-ish
        assert np.all(np.abs(fast - ref) <= 8 * U * np.max(np.abs(ref), axis=-1, keepdims=True) * 2)


def test_central_differences():
    rng = np.random.default_rng(13)
    pos = np.array([[0, 3, 600], [1000, 7, 2]])
    q, k = rng.standard_normal((2, 3, 2, 10)), rng.standard_normal((2, 3, 2, 10))
    gq, gk = rng.standard_normal(q.shape), rng.standard_normal(k.shape)
    kw = dict(rotary_dim=8, layout="interleaved", centre=100.0, backend="numpy")
    vq, vk = backward.apply_vjp(gq, gk, pos, **kw)
    h = 0.125
    for which, (x, g, v) in enumerate(((q, gq, vq), (k, gk, vk))):
        fd = np.empty(x.shape)
        for e in range(10):
            step = np.zeros(x.shape)
            step[..., e] = h
            plus = xpos.apply(x + step, x + step, pos, **kw)[which]
            diff = (plus - xpos.apply(x - step, x - step, pos, **kw)[which]) / (2 * h)
            fd[..., e] = np.sum(g * diff, axis=-1)
        # linear map with entries at most A = max scale: 8u A (|x| + h) / h per output, times sum |g|
        e_exp = (pos - 100.0) / 512.0
        scales = xpos.zeta(8)[None, None, :] ** (e_exp[..., None] * (1 if which == 0 else -1))
        amp = max(float(np.max(scales)), 1.0)
        tol = 8 * U * amp * (np.max(np.abs(x)) + h) / h * np.sum(np.abs(g), axis=-1, keepdims=True)
        assert np.all(np.abs(fd - v) <= tol)
        assert np.max(np.abs(fd - xpos.apply(g, g, pos, **kw)[which])) > 1e-3


def test_not_the_forward_at_minus_m():
    """The scale stays at +m: the forward at -m would invert it (a check that can fail)."""
    g = np.ones((1, 1, 1, 4))
    pos = np.array([[2048]])
    got_q, _ = backward.apply_vjp(g, g, pos, rotary_dim=4)
    wrong_q, _ = xpos.apply(g, g, -pos, rotary_dim=4)
    s0 = xpos.zeta(4)[0] ** (2048 / 512)
    assert abs(np.hypot(got_q[0, 0, 0, 0], got_q[0, 0, 0, 1]) - s0 * np.sqrt(2)) < 1e-14
    assert np.max(np.abs(got_q - wrong_q)) > 0.1


def test_errors_and_mutants():
    with pytest.raises(ValueError, match="^g_k:"):
        backward.apply_vjp(np.zeros((1, 2, 1, 4)), np.zeros((1, 3, 1, 4)), np.zeros((1, 2), np.int64))
    with pytest.raises(ValueError, match="^g_q:"):
        backward.apply_vjp(np.zeros((2, 1, 4)), np.zeros((2, 1, 4)), np.zeros((1, 2), np.int64))
    rng = np.random.default_rng(14)
    pos = np.array([[3, 700, 1500]])
    gq, gk = rng.standard_normal((1, 3, 1, 8)), rng.standard_normal((1, 3, 1, 8))
    right = np.concatenate(backward.apply_vjp(gq, gk, pos, rotary_dim=8))
    muts = backward.mutants(gq, gk, pos, rotary_dim=8)
    assert set(muts) == {"backward-transposed", "backward-layout", "backward-missing", "backward-scale"}
    for code, items in muts.items():
        for _, (mq, mk) in items:
            assert np.linalg.norm(np.concatenate([mq, mk]) - right) > 1e-3 * np.linalg.norm(right), code


def test_backward_identity_holds():
    import reference.xpos.identities  # noqa: F401

    assert run_identity(REGISTRY["xpos.backward-adjoint"])["verdict"] == "holds"


def test_backward_identity_sees_the_transposed_mistake(monkeypatch):
    import reference.xpos.identities  # noqa: F401

    monkeypatch.setattr(backward, "apply_vjp", lambda gq, gk, m, **kw: xpos.apply(gq, gk, m, **kw))
    assert run_identity(REGISTRY["xpos.backward-adjoint"])["verdict"] == "failing"
