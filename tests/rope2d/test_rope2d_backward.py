"""Axial 2-D RoPE's backward (reference/rope2d/backward.py, issue 15): R^T g, CLS tokens passed
through, RoPE-Mixed included, against central differences and the exact mpmath VJP."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from reference import rope2d
from reference.golden.certify import nearest_double
from reference.identities import REGISTRY, run_identity
from reference.rope2d import backward, oracle

U = 2.0**-53


def _exact(g, forward_exact):
    exact = np.empty(g.shape, dtype=object)
    d = g.shape[-1]
    with mpmath.workprec(200):
        for e in range(d):
            basis = np.zeros(g.shape)
            basis[..., e] = 1.0
            col = forward_exact(basis)
            for idx in np.ndindex(g.shape[:-1]):
                exact[idx + (e,)] = mpmath.fsum(mpmath.mpf(float(g[idx + (j,)])) * col[idx + (j,)] for j in range(d))
    return np.array([nearest_double(v) for v in exact.ravel()]).reshape(g.shape)


CASES = [
    (dict(base=100.0, layout="interleaved", order=("x", "y"), cls_tokens=1), None),
    (dict(base=1e4, layout="half", order=("y", "x"), cls_tokens=0), None),
    (dict(base=100.0, layout="interleaved", order=("x", "y"), cls_tokens=1), "mixed"),
]


@pytest.mark.parametrize("kw, mixed", CASES)
def test_golden_exact_fast_and_differences(kw, mixed):
    rng = np.random.default_rng(31)
    coords = np.array([[[0, 0], [3, 1], [7, 12]]])
    g = rng.standard_normal((1, 3, 2, 8))
    if mixed:
        kw = dict(kw, freqs=rng.standard_normal((2, 2, 4)))
        ref = _exact(g, lambda b: oracle.mixed_exact(b, coords, kw["freqs"], kw["layout"], kw["cls_tokens"]))
    else:
        ref = _exact(g, lambda b: oracle.apply_exact(b, coords, kw["base"], kw["layout"], kw["order"],
                                                     kw["cls_tokens"]))
    for be in ("cpu", "numpy"):
        assert np.array_equal(backward.apply_vjp(g, coords, mode="golden", backend=be, **kw), ref)
    fast = backward.apply_vjp(g, coords, **kw)
    assert np.array_equal(fast[:, :kw["cls_tokens"]], g[:, :kw["cls_tokens"]])  # CLS: g passes through
    # axial: 5u per element of the pair's norm; mixed: plus the float64 angle x f_x + y f_y, two products
    # and a sum (2u (|x f_x| + |y f_y|) absolute), which moves each element by that times the pair's norm
    angle_err = 0.0
    if mixed:
        c = np.abs(coords).max(axis=(0, 1))
        angle_err = 2 * U * float(np.max(c[0] * np.abs(kw["freqs"][0]) + c[1] * np.abs(kw["freqs"][1])))
    assert np.all(np.abs(fast - ref) <= (6 * U + angle_err) * np.max(np.abs(g), axis=-1, keepdims=True) * 2)
    x = rng.standard_normal(g.shape)
    h = 0.125
    fd = np.empty(g.shape)
    for e in range(8):
        step = np.zeros(g.shape)
        step[..., e] = h
        fd[..., e] = np.sum(g * (rope2d.apply(x + step, coords, **kw) - rope2d.apply(x - step, coords, **kw)) / (2 * h),
                            axis=-1)
    tol = 8 * U * (np.max(np.abs(x)) + h) / h * np.sum(np.abs(g), axis=-1, keepdims=True)
    assert np.all(np.abs(fd - fast) <= tol)
    assert np.max(np.abs(fd - rope2d.apply(g, coords, **kw))) > 1e-3


def test_errors_and_mutants():
    with pytest.raises(ValueError, match="^coords:"):
        backward.apply_vjp(np.zeros((1, 2, 1, 8)), np.zeros((1, 2, 2)))
    rng = np.random.default_rng(32)
    coords = rng.integers(1, 30, (1, 4, 2))
    g = rng.standard_normal((1, 4, 2, 8))
    right = backward.apply_vjp(g, coords, cls_tokens=1)
    muts = backward.mutants(g, coords, cls_tokens=1)
    assert set(muts) == {"backward-transposed", "backward-layout", "backward-missing", "backward-scale"}
    assert len(muts["backward-missing"]) == 2
    for code, items in muts.items():
        for _, arr in items:
            assert np.linalg.norm(arr - right) > 1e-3 * np.linalg.norm(right), code


def test_backward_identity_holds():
    import reference.rope2d.identities  # noqa: F401

    assert run_identity(REGISTRY["rope2d.backward-adjoint"])["verdict"] == "holds"


def test_backward_identity_sees_the_transposed_mistake(monkeypatch):
    import reference.rope2d.identities  # noqa: F401

    monkeypatch.setattr(backward, "apply_vjp", lambda g, c, **kw: rope2d.apply(g, c, **kw))
    assert run_identity(REGISTRY["rope2d.backward-adjoint"])["verdict"] == "failing"
