"""The float64 backward of fire.bias (reference/numerics/bias/fire_backward.py): an mpmath derivative of the
objective sum G b at 200 bits (one-sided derivatives averaged at the tie i = L, torch.max's
convention), central differences on the MLP parameters (exact there up to rounding), the
adjoint identity, torch's conventions at the kinks, the fast backends (numpy, cpu) within
vjp_bound of golden on the kinks, argument errors."""

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


# ---- the fast backends (numpy, cpu; cuda in test_fire_cuda.py) against golden, within vjp_bound ----

FAST_BACKENDS = ("numpy", "cpu")


def _kink_weights(**changes):
    """_weights() with b1[0] = 0: unit 0's pre-activation is exactly 0 wherever x = 0 (i = j, or c = 0)."""
    w = _weights()
    w["b1"][0] = 0.0
    return w | changes


# (name, q positions, k positions, weights, init_L, bound small for every role, G zero on keys j > i)
KINK_CASES = [
    ("tie-and-zero-preactivation", QP, np.array([0, 1, 2, 4]), _kink_weights(), INIT_L, True, False),
    ("negative-c-and-multiplier", QP, np.array([0, 1, 2, 4]), _kink_weights(c=-0.3, L_multiplier=-2.0), INIT_L, True,
     True),
    ("c-and-multiplier-zero", QP, KP, _kink_weights(c=0.0, L_multiplier=0.0), INIT_L, True, False),
    # 0.1 * 10 rounds to 1.0: a tie at query 1 for the float64 L, not for the exact one (L > 1)
    ("inexact-tie", np.array([0, 1, 3]), np.array([0, 1, 2]), _kink_weights(L_multiplier=0.1), 10.0, False, False),
] + [(f"adjoint-case-{n}", qp, kp, identities._weights(lm=lm), init_L, True, n == 0)
     for n, (qp, kp, lm, init_L) in enumerate(identities.BACKWARD_CASES)]


@pytest.mark.parametrize("name, qp, kp, w, init_L, small, causal", KINK_CASES, ids=[c[0] for c in KINK_CASES])
def test_fast_backends_within_the_vjp_bound(name, qp, kp, w, init_L, small, causal):
    G = np.random.default_rng(len(name)).uniform(-2, 2, (w["W2"].shape[0], qp.size, kp.size))
    if causal:  # the cotangent the conformance side passes for a causal bias: zero on the masked keys
        G[:, kp[None, :] > qp[:, None]] = 0.0
    golden = backward.bias_vjp(G, qp, kp, w, init_L=init_L, mode="golden")
    bound = backward.vjp_bound(G, qp, kp, w, init_L=init_L)
    for backend in FAST_BACKENDS:
        fast = backward.bias_vjp(G, qp, kp, w, init_L=init_L, backend=backend)
        for role in backward.ROLES:
            assert np.shape(fast[role]) == np.shape(golden[role]) == np.shape(bound[role]), (backend, role)
            assert np.all(np.abs(fast[role] - golden[role]) <= bound[role]), (backend, role, fast[role], golden[role])
    for role in backward.ROLES:
        if small or role != "L_multiplier":  # not vacuous: at least 30 bits of every gradient
            assert np.all(bound[role] <= 1e-9 * (1 + np.abs(golden[role]).max())), role


def _kink_terms(G, qp, kp, w, init_L):
    """(relu'(0) = 1's extra in grad b1[0], the tie row's term of grad L_mult (half the one-sided
    derivative's), the grad c that sign(0) = 1 would give): what each wrong convention changes."""
    f = backward.features(qp, kp, w, init_L=init_L)
    Gm = np.moveaxis(G, 0, -1)
    at_zero = f["p"][..., 0] == 0
    relu_extra = float(np.sum((Gm @ w["W2"][:, 0])[at_zero]))
    gx = ((Gm @ w["W2"]) * f["active"]) @ w["W1"][:, 0]
    tie = float(np.sum((gx * f["dx_dL"])[f["dm_dL"][:, 0] == 0.5])) * np.sign(w["L_multiplier"]) * init_L
    ac, n, m, A, D = abs(w["c"]), f["n"], f["m"], f["A"], f["D"]
    sign_one = float(np.sum(gx * (n / ((ac * n + 1) * D) - A * m / ((ac * m + 1) * D * D))))
    return relu_extra, tie, sign_one


def test_the_bound_tells_the_kink_conventions_apart():
    """A backend with relu'(0) = 1, the whole one-sided derivative at the tie, or sign(0) = 1 would
    be off by more than vjp_bound: the bound checks the conventions, not only the rounding."""
    G = np.random.default_rng(12).uniform(-2, 2, (2, 3, 4))
    qp, kp, w = QP, np.array([0, 1, 2, 4]), _kink_weights()
    assert np.sum(backward.features(qp, kp, w, init_L=INIT_L)["p"][..., 0] == 0) == 3  # i = j at 0, 2, 4
    bound = backward.vjp_bound(G, qp, kp, w, init_L=INIT_L)
    relu_extra, tie, _ = _kink_terms(G, qp, kp, w, INIT_L)
    assert abs(relu_extra) > 1e6 * bound["b1"][0] and abs(tie) > 1e6 * bound["L_multiplier"]
    zero = _kink_weights(c=0.0, L_multiplier=0.0)
    G0 = np.random.default_rng(13).uniform(-2, 2, (2, 3, 3))
    bound0 = backward.vjp_bound(G0, QP, KP, zero, init_L=INIT_L)
    assert bound0["c"] == 0 and bound0["L_multiplier"] == 0 and abs(_kink_terms(G0, QP, KP, zero, INIT_L)[2]) > 0
    for backend in FAST_BACKENDS:
        grads = backward.bias_vjp(G0, QP, KP, zero, init_L=INIT_L, backend=backend)
        assert grads["c"] == 0 and grads["L_multiplier"] == 0, backend


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_no_query_gives_zero_gradients(backend):
    w = _weights()
    grads = backward.bias_vjp(np.zeros((2, 0, 3)), np.array([], dtype=np.int64), KP, w, backend=backend)
    for role in backward.ROLES:
        assert np.shape(grads[role]) == np.shape(w[role]) and not np.any(grads[role]), role


def test_backend_is_checked_and_golden_ignores_it():
    w = _weights()
    G = np.random.default_rng(14).uniform(-2, 2, (2, 3, 3))
    with pytest.raises(ValueError, match="^backend: must be one of cpu, cuda, numpy; got 'gpu'$"):
        backward.bias_vjp(G, QP, KP, w, backend="gpu")
    golden = backward.bias_vjp(G, QP, KP, w, init_L=INIT_L, mode="golden")
    other = backward.bias_vjp(G, QP, KP, w, init_L=INIT_L, backend="cuda", mode="golden")  # no GPU needed
    assert all(np.array_equal(golden[r], other[r]) for r in backward.ROLES)
