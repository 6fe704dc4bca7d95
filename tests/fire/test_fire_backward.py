"""The float64 backward of fire.bias (reference/fire/backward.py): an mpmath derivative of the
objective sum G b at 200 bits (one-sided derivatives averaged at the tie i = L, torch.max's
convention), central differences on the MLP parameters (exact there up to rounding), the
adjoint identity, torch's conventions at the kinks, argument errors."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

from reference.fire import backward, identities

U = 2.0**-53
QP, KP = np.array([0, 2, 4]), np.array([0, 1, 3])
INIT_L = 1.0  # L = |2 * 1| = 2: query 2 sits on the threshold


def _weights(seed=3, lm=2.0):
    rng = np.random.default_rng(seed)
    grid = lambda shape: rng.integers(-256, 257, shape) / 256.0  # noqa: E731
    return {"c": 0.3, "L_multiplier": lm, "W1": grid((4, 1)), "b1": grid(4) / 2, "W2": grid((2, 4)), "b2": grid(2)}


def _objective(G, w, role, index):
    """t -> sum_hij G_hij b_hij with parameter role[index] = t, at the working precision (mpmath,
    written from the formula: psi(x) = ln(|c x| + 1), x = psi(i - j) / (psi(max(i, L)) + eps))."""
    base = {r: np.array(v, dtype=object) for r, v in w.items()}

    def f(t):
        p = {r: np.vectorize(lambda v: mpmath.mpf(float(v)), otypes=[object])(a) for r, a in base.items()}
        if role in ("c", "L_multiplier"):
            p[role] = t
        else:
            p[role][index] = t
        c, L = p["c"], abs(p["L_multiplier"] * INIT_L)
        total = mpmath.mpf(0)
        for a, i in enumerate(QP.tolist()):
            norm = mpmath.ln(abs(c * max(mpmath.mpf(i), L)) + 1) + mpmath.mpf(1e-6)
            for b, j in enumerate(KP.tolist()):
                x = mpmath.ln(abs(c * (i - j)) + 1) / norm
                hid = [max(p["W1"][k, 0] * x + p["b1"][k], 0) for k in range(4)]
                for h in range(2):
                    total += mpmath.mpf(float(G[h, a, b])) * (mpmath.fsum(p["W2"][h, k] * hid[k] for k in range(4))
                                                              + p["b2"][h])
        return total
    return f


def test_golden_is_faithful_to_an_mpmath_derivative():
    w = _weights()
    G = np.random.default_rng(4).uniform(-2, 2, (2, 3, 3))
    golden = backward.bias_vjp(G, QP, KP, w, init_L=INIT_L, mode="golden")
    with mpmath.workprec(200):
        for role, value in w.items():
            for index in np.ndindex(np.shape(value)):
                f = _objective(G, w, role, index)
                at = mpmath.mpf(float(np.asarray(value)[index]))
                if role == "L_multiplier":  # the tie: the mean of the one-sided derivatives
                    exact = (mpmath.diff(f, at, direction=1) + mpmath.diff(f, at, direction=-1)) / 2
                else:
                    exact = mpmath.diff(f, at)
                got = float(np.asarray(golden[role])[index])
                assert abs(mpmath.mpf(got) - exact) <= abs(exact) * 2.0**-52, (role, index, got, exact)
    # the tie matters: the one-sided derivatives differ there
    with mpmath.workprec(200):
        f = _objective(G, w, "L_multiplier", ())
        right, left = mpmath.diff(f, mpmath.mpf(2), direction=1), mpmath.diff(f, mpmath.mpf(2), direction=-1)
        assert abs(right - left) > 1e-3 * abs(right)


def test_central_differences_on_the_mlp_parameters():
    """b is linear in W2 and b2 and piecewise linear in W1 and b1: with no pre-activation within
    the step of its kink, (f(w + h e) - f(w - h e)) / 2h is the derivative up to the rounding of the
    two fast forwards (fast_bound each), the products with G and fsum (2u of their terms), the
    difference (u) and golden's own (faithful) rounding."""
    from reference import fire

    w = _weights(lm=1.0)
    G = np.random.default_rng(5).uniform(-2, 2, (2, 3, 3))
    golden = backward.bias_vjp(G, QP, KP, w, init_L=INIT_L, mode="golden")
    f = backward.features(QP, KP, w, init_L=INIT_L)
    h = 2.0**-12
    assert np.min(np.abs(f["p"])) > 4 * h  # no kink within reach of the steps below (|x| <= 1)
    for role in ("W1", "b1", "W2", "b2"):
        for index in np.ndindex(w[role].shape):
            sides, tol = [], 0.0
            for sign in (1.0, -1.0):
                moved = {r: np.array(v, dtype=np.float64) for r, v in w.items()}
                moved[role][index] += sign * h
                out = fire.bias(QP, KP, moved, init_L=INIT_L, backend="numpy")
                sides.append(math.fsum((G * out).reshape(-1).tolist()))
                tol += float(np.sum(np.abs(G) * (fire.fast_bound(QP, KP, moved, init_L=INIT_L) + 2 * U * np.abs(out))))
            fd = (sides[0] - sides[1]) / (2 * h)
            want = golden[role][index]
            assert abs(fd - want) <= tol / (2 * h) + U * abs(fd) + 2 * U * abs(want), (role, index)


def test_fast_mode_agrees_with_golden():
    """Fast vs golden on the three cases of the adjoint identity (relative to the terms' size)."""
    for qp, kp, lm, init_L in identities.BACKWARD_CASES:
        w = identities._weights(lm=lm)
        G = np.random.default_rng(6).uniform(-2, 2, (w["W2"].shape[0], qp.size, kp.size))
        fast = backward.bias_vjp(G, qp, kp, w, init_L=init_L)
        golden = backward.bias_vjp(G, qp, kp, w, init_L=init_L, mode="golden")
        for role in backward.ROLES:
            assert np.shape(fast[role]) == np.shape(w[role]) or role in ("c", "L_multiplier")
            scale = 1.0 + np.abs(golden[role]).max()
            assert np.max(np.abs(fast[role] - golden[role])) <= 1e-12 * scale, role


def test_conventions_match_torch_at_the_kinks():
    """torch.max splits the gradient at a tie (1/2 each), relu'(0) = 0: the reference's dm/dL and
    ReLU mask match autograd in float64 on the tie case."""
    w = _weights()
    t = {r: torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for r, v in w.items()}
    q, k = torch.tensor(QP, dtype=torch.float64), torch.tensor(KP, dtype=torch.float64)
    threshold = torch.abs(t["L_multiplier"] * INIT_L)
    norm = torch.log(torch.abs(t["c"] * torch.max(q, threshold)[:, None]) + 1) + 1e-6
    x = torch.log(torch.abs(t["c"] * (q[:, None] - k[None, :])) + 1) / norm
    hid = torch.relu(x[..., None] * t["W1"][:, 0] + t["b1"])
    out = (hid @ t["W2"].T + t["b2"]).permute(2, 0, 1)
    G = np.random.default_rng(4).uniform(-2, 2, (2, 3, 3))
    out.backward(torch.from_numpy(G))
    ref = backward.bias_vjp(G, QP, KP, w, init_L=INIT_L, mode="golden")
    assert backward.features(QP, KP, w, init_L=INIT_L)["dm_dL"][:, 0].tolist() == [1.0, 0.5, 0.0]
    for role in backward.ROLES:
        got = t[role].grad.numpy()
        assert np.allclose(got, ref[role], rtol=1e-13, atol=1e-13), (role, got, ref[role])


def test_the_adjoint_identity_holds_and_catches_a_wrong_gradient():
    assert identities.backward_adjoint() <= 1.0
    qp, kp, lm, init_L = identities.BACKWARD_CASES[2]
    w, d = identities._weights(lm=lm), identities._weights(seed=8, lm=0.5)
    G = np.random.default_rng(9).uniform(-2, 2, (4, qp.size, kp.size))
    grads = backward.bias_vjp(G, qp, kp, w, init_L=init_L)
    grads["L_multiplier"] = grads["L_multiplier"] * 2  # the tie's full one-sided derivative is not it either
    lhs = math.fsum(float(p) for r, g in grads.items() for p in (np.asarray(g) * d[r]).reshape(-1))
    rhs = math.fsum((G * backward.bias_jvp(d, qp, kp, w, init_L=init_L)).reshape(-1).tolist())
    N, K = identities.adjoint_terms(G, qp, kp, w, d, init_L)
    assert abs(lhs - rhs) > 1e6 * K * U * N


def test_user_errors_name_the_argument():
    w = _weights()
    with pytest.raises(ValueError, match="^G:"):
        backward.bias_vjp(np.zeros((2, 3, 2)), QP, KP, w)
    with pytest.raises(ValueError, match="^G:"):
        backward.bias_vjp(np.full((2, 3, 3), np.inf), QP, KP, w)
    with pytest.raises(ValueError, match="^mode"):
        backward.bias_vjp(np.zeros((2, 3, 3)), QP, KP, w, mode="exact")
    with pytest.raises(ValueError, match="^q_positions"):
        backward.bias_vjp(np.zeros((2, 3, 3)), -QP - 1, KP, w)
