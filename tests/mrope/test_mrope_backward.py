"""M-RoPE's backward (reference/mrope/backward.py, issue 15): R^T g (each pair turned back by its
stream's angle) against central differences and the exact mpmath VJP, the identity, the mutants."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from reference import mrope
from reference.golden.certify import nearest_double
from reference.identities import REGISTRY, run_identity
from reference.mrope import backward, oracle

U = 2.0**-53


@pytest.mark.parametrize("section, variant, layout",
                         [((1, 1, 1), "qwen2", "half"), ((1, 1, 1), "qwen3", "interleaved")])
def test_golden_exact_fast_and_differences(section, variant, layout):
    rng = np.random.default_rng(21)
    pos = np.stack([np.array([[0, 5, 4096]]), np.array([[0, 2, 9]]), np.array([[0, 7, 2**20]])])
    g = rng.standard_normal((1, 3, 1, 8))
    exact = np.empty(g.shape, dtype=object)
    with mpmath.workprec(200):
        for e in range(8):
            basis = np.zeros(g.shape)
            basis[..., e] = 1.0
            col = oracle.apply_exact(basis, pos, 6, 1e4, layout, list(section), variant)
            for idx in np.ndindex(g.shape[:-1]):
                exact[idx + (e,)] = mpmath.fsum(mpmath.mpf(float(g[idx + (j,)])) * col[idx + (j,)] for j in range(8))
    ref = np.array([nearest_double(v) for v in exact.ravel()]).reshape(g.shape)
    kw = dict(mrope_section=section, variant=variant, rotary_dim=6, layout=layout)
    for be in ("cpu", "numpy"):
        assert np.array_equal(backward.apply_vjp(g, pos, mode="golden", backend=be, **kw), ref)
    fast = backward.apply_vjp(g, pos, **kw)
    assert np.all(np.abs(fast - ref) <= 6 * U * np.max(np.abs(g), axis=-1, keepdims=True) * 2)
    assert np.array_equal(fast[..., 6:], g[..., 6:])
    x = rng.standard_normal(g.shape)
    h = 0.125
    fd = np.empty(g.shape)
    for e in range(8):
        step = np.zeros(g.shape)
        step[..., e] = h
        diff = (mrope.apply(x + step, pos, **kw) - mrope.apply(x - step, pos, **kw)) / (2 * h)
        fd[..., e] = np.sum(g * diff, axis=-1)
    # linear map, entries <= 1, each output within 5u (|x| + h) plus input rounding: 8u (|x| + h) / h sum |g|
    tol = 8 * U * (np.max(np.abs(x)) + h) / h * np.sum(np.abs(g), axis=-1, keepdims=True)
    assert np.all(np.abs(fd - fast) <= tol)
    assert np.max(np.abs(fd - mrope.apply(g, pos, **kw))) > 1e-3


def test_errors_and_mutants():
    with pytest.raises(ValueError, match="^g:"):
        backward.apply_vjp(np.zeros((1, 2, 8)), np.zeros((3, 1, 2), np.int64), mrope_section=(2, 1, 1))
    with pytest.raises(ValueError, match="^positions:"):
        backward.apply_vjp(np.zeros((1, 2, 1, 8)), np.zeros((3, 1, 2)), mrope_section=(2, 1, 1))
    rng = np.random.default_rng(22)
    pos = rng.integers(1, 500, (3, 1, 4))
    g = rng.standard_normal((1, 4, 2, 8))
    kw = dict(mrope_section=(2, 1, 1))
    right = backward.apply_vjp(g, pos, **kw)
    muts = backward.mutants(g, pos, **kw)
    assert set(muts) == {"backward-transposed", "backward-layout", "backward-missing", "backward-scale"}
    for code, items in muts.items():
        for _, arr in items:
            assert np.linalg.norm(arr - right) > 1e-3 * np.linalg.norm(right), code


def test_backward_identity_holds():
    import reference.mrope.identities  # noqa: F401

    assert run_identity(REGISTRY["mrope.backward-adjoint"])["verdict"] == "holds"


def test_backward_identity_sees_the_transposed_mistake(monkeypatch):
    import reference.mrope.identities  # noqa: F401

    monkeypatch.setattr(backward, "apply_vjp", lambda g, p, **kw: mrope.apply(g, p, **kw))
    assert run_identity(REGISTRY["mrope.backward-adjoint"])["verdict"] == "failing"
