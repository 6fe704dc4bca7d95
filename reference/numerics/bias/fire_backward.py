"""FIRE's backward pass in float64: the vector-Jacobian product of ``reference.fire.bias`` with
respect to every float parameter (c, L_multiplier, W1, b1, W2, b2; positions are integers).

Formula. Per query i and key j (n = |i - j|, m = max(i, L), L = |L_multiplier init_L|,
A = psi(n) = log(|c| n + 1), D = psi(m) + eps, x = A / D), hidden unit k and head h:
p_k = W1_k x + b1_k, a_k = relu(p_k), b_h = sum_k W2_hk a_k + b2_h. For a cotangent G [H, sq, sk]:

    grad_b2[h]    = sum_ij G_hij                    grad_W2[h, k] = sum_ij G_hij a_k
    delta_k(ij)   = [p_k > 0] sum_h G_hij W2_hk      (torch's relu'(0) = 0)
    grad_b1[k]    = sum_ij delta_k                  grad_W1[k, 0] = sum_ij delta_k x
    gx(ij)        = sum_k delta_k W1_k              (the gradient of the feature x)
    grad_c        = sum_ij gx sign(c) (n / ((|c| n + 1) D) - A m / ((|c| m + 1) D^2))
    grad_L_mult   = -sum_ij gx A |c| / ((|c| m + 1) D^2) dm/dL sign(L_multiplier) init_L

with dm/dL = 1 where L > i, 0 where L < i, and 1/2 where L = i: the non-differentiable point of
max(i, L) takes torch.max / torch.maximum's convention, which splits the gradient equally between
two equal arguments (the mean of the one-sided derivatives). sign(0) = 0 (torch's abs'(0) = 0).
Derived from the formula of reference.fire (FIRE, Li et al., arXiv 2310.04418, eq. 5 and the
progressive interpolation of sec. 3.2, as the public module computes it).

Shapes: G [H, sq, sk]; ``bias_vjp`` returns {"c": 0-d, "L_multiplier": 0-d, "W1": [hidden, 1],
"b1": [hidden], "W2": [H, hidden], "b2": [H]} float64. ``features`` returns the intermediate
quantities (float64) that budgets and diagnoses use. Modes: fast, float64 with log1p, on a backend:
"numpy" (the default: ``features`` and einsum), "cpu" (a Numba @njit kernel, one pass over the
entries in row-major order) or "cuda" (numba.cuda: a thread per entry for x and the c and
L_multiplier terms, then a thread per gradient element summing over the entries in the same
order; deterministic), each following the conventions above exactly and within ``vjp_bound``;
golden (each element computed at 200 bits with the ReLU mask and the tie decided exactly, rounded
once: a reduction, faithful; the same on every backend). The mask and the tie are decided on the
computed values in fast mode; ``vjp_bound`` covers the cases where that decision may differ from
the exact one. ``bias_jvp`` is forward mode (the identity fire.backward-adjoint checks the VJP
against it). Never imports torch.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np

from reference.golden.certify import nearest_double
from reference.numerics.validate import check_backend, check_mode

from .fire import EPS, INIT_L, ROLES, _check_config, check_weights, positions

U = 2.0**-53

__all__ = ["ROLES", "bias_jvp", "bias_vjp", "features", "vjp_bound"]


def check_cotangent(G, heads, sq, sk) -> np.ndarray:
    cot = np.asarray(G)
    if cot.dtype.kind not in "fiu" or cot.shape != (heads, sq, sk):
        raise ValueError(f"G: must be a real array of shape [heads, sq, sk] = {[heads, sq, sk]}, "
                         f"got {cot.dtype} with shape {list(cot.shape)}")
    cot = cot.astype(np.float64)
    if not np.all(np.isfinite(cot)):
        raise ValueError("G: must hold finite numbers")
    return cot


def features(q_positions, k_positions, weights, *, init_L=INIT_L, eps=EPS) -> dict:
    """float64 intermediates: n, m [sq, 1], A, D [sq, 1], x [sq, sk], p, a, active [sq, sk, hidden],
    dm_dL [sq, 1] (1, 1/2 at a tie, 0), dx_dc and dx_dL [sq, sk] (d x / d L, before dL/dL_mult)."""
    w = check_weights(weights)
    qp, kp = positions(q_positions, "q_positions"), positions(k_positions, "k_positions")
    init_L, eps = _check_config(init_L, eps)
    L = abs(w["L_multiplier"] * init_L)
    ac = abs(w["c"])
    i = qp.astype(np.float64)[:, None]
    n = np.abs(i - kp.astype(np.float64)[None, :])
    m = np.maximum(i, L)
    A = np.log1p(ac * n)
    D = np.log1p(ac * m) + eps
    x = A / D
    p = w["W1"][:, 0] * x[..., None] + w["b1"]
    dm_dL = np.where(L > i, 1.0, np.where(L == i, 0.5, 0.0))
    return {"n": n, "m": m, "A": A, "D": D, "x": x, "p": p, "a": np.maximum(p, 0.0), "active": p > 0,
            "L": L, "dm_dL": dm_dL,
            "dx_dc": np.sign(w["c"]) * (n / ((ac * n + 1) * D) - A * m / ((ac * m + 1) * D * D)),
            "dx_dL": -A * ac / ((ac * m + 1) * D * D) * dm_dL}


def bias_vjp(G, q_positions, k_positions, weights, *, init_L=INIT_L, eps=EPS, backend="numpy", mode="fast") -> dict:
    """{role: gradient} of sum_hij G_hij bias_hij (module docstring). backend ("numpy", "cpu",
    "cuda") picks the fast mode's implementation; golden mode is the mpmath computation on every
    backend."""
    w = check_weights(weights)
    qp, kp = positions(q_positions, "q_positions"), positions(k_positions, "k_positions")
    init_L, eps = _check_config(init_L, eps)
    G = check_cotangent(G, w["W2"].shape[0], qp.size, kp.size)
    backend, mode = check_backend(backend), check_mode(mode)
    if mode == "golden":
        return _golden(G, qp, kp, w, init_L, eps)
    if backend == "numpy":
        return _numpy_vjp(G, qp, kp, w, init_L, eps)
    if backend == "cpu":
        from . import fire_cpu_kernels as kernels  # numba start-up: imported on first use
    else:
        from . import fire_cuda_kernels as kernels  # numba start-up: imported on first use
    return kernels.bias_vjp(G, qp, kp, w["c"], abs(w["L_multiplier"] * init_L), eps, w["W1"][:, 0], w["b1"], w["W2"],
                            float(np.sign(w["L_multiplier"])), init_L)


def _numpy_vjp(G, qp, kp, w, init_L, eps) -> dict:
    """The fast VJP with NumPy (backend "numpy"): the module docstring's formulas on ``features``."""
    f = features(qp, kp, w, init_L=init_L, eps=eps)
    Gm = np.moveaxis(G, 0, -1)  # [sq, sk, H]
    delta = (Gm @ w["W2"]) * f["active"]  # [sq, sk, hidden]
    gx = delta @ w["W1"][:, 0]
    return {
        "c": np.array(np.sum(gx * f["dx_dc"])),
        "L_multiplier": np.array(np.sum(gx * f["dx_dL"]) * np.sign(w["L_multiplier"]) * init_L),
        "W1": np.einsum("ijk,ij->k", delta, f["x"])[:, None],
        "b1": delta.sum(axis=(0, 1)),
        "W2": np.einsum("ijh,ijk->hk", Gm, f["a"]),
        "b2": G.sum(axis=(1, 2)),
    }


def _golden(G, qp, kp, w, init_L, eps) -> dict:
    heads, hidden = w["W2"].shape
    with mpmath.workprec(200):
        mp = lambda v: mpmath.mpf(float(v))  # noqa: E731
        c, lm, e = mp(w["c"]), mp(w["L_multiplier"]), mp(eps)
        ac, L = abs(c), abs(lm * mp(init_L))
        w1, b1 = [mp(v) for v in w["W1"][:, 0]], [mp(v) for v in w["b1"]]
        w2 = [[mp(v) for v in row] for row in w["W2"]]
        sums = {"c": mpmath.mpf(0), "L": mpmath.mpf(0), "W1": [mpmath.mpf(0)] * hidden,
                "b1": [mpmath.mpf(0)] * hidden, "W2": [[mpmath.mpf(0)] * hidden for _ in range(heads)],
                "b2": [mpmath.mpf(0)] * heads}
        for a_, i in enumerate(qp.tolist()):
            m = max(mpmath.mpf(i), L)
            dm_dL = 1 if L > i else (mpmath.mpf(1) / 2 if L == i else 0)
            D = mpmath.log1p(ac * m) + e
            for b_, j in enumerate(kp.tolist()):
                g = [mp(G[h, a_, b_]) for h in range(heads)]
                if not any(g):
                    continue
                n = mpmath.mpf(abs(i - j))
                A = mpmath.log1p(ac * n)
                x = A / D
                gx = mpmath.mpf(0)
                for k in range(hidden):
                    p = w1[k] * x + b1[k]
                    act = p if p > 0 else mpmath.mpf(0)
                    for h in range(heads):
                        sums["W2"][h][k] += g[h] * act
                    if p > 0:
                        delta = mpmath.fsum(g[h] * w2[h][k] for h in range(heads))
                        sums["b1"][k] += delta
                        sums["W1"][k] += delta * x
                        gx += delta * w1[k]
                for h in range(heads):
                    sums["b2"][h] += g[h]
                sums["c"] += gx * mpmath.sign(c) * (n / ((ac * n + 1) * D) - A * m / ((ac * m + 1) * D * D))
                sums["L"] -= gx * A * ac / ((ac * m + 1) * D * D) * dm_dL
        nd = nearest_double
        return {
            "c": np.array(nd(sums["c"])),
            "L_multiplier": np.array(nd(sums["L"] * mpmath.sign(lm) * mp(init_L))),
            "W1": np.array([[nd(v)] for v in sums["W1"]]),
            "b1": np.array([nd(v) for v in sums["b1"]]),
            "W2": np.array([[nd(v) for v in row] for row in sums["W2"]]),
            "b2": np.array([nd(v) for v in sums["b2"]]),
        }


def vjp_bound(G, q_positions, k_positions, weights, *, init_L=INIT_L, eps=EPS) -> dict:
    """{role: bound shaped like the gradient} on |fast bias_vjp - exact| for every backend, which
    also holds against golden mode: K u N + C, u = 2^-53, first order, no underflow, with

        K = H + hidden + sq sk + 24,

    N_role the sum of |terms| of the gradient with every unit counted as active: S_k = sum_h |G_h|
    |W2_hk|, P_k = |W1_k| |x| + |b1_k| (>= |p_k| and >= a_k), T = sum_k S_k |W1_k| (>= |gx|),
    X_c = |sign c| (|t1| + |t2|) with dx/dc = sign(c) (t1 - t2) (module docstring), X_L = |A| |c| /
    ((|c| m + 1) D^2) dm/dL: N_b2 = sum_ij |G|, N_W2 = sum_ij |G_h| P_k, N_b1 = sum_ij S_k, N_W1 =
    sum_ij S_k |x|, N_c = sum_ij T X_c, N_L = init_L |sign L_mult| sum_ij T X_L.

    Counts (relative errors in u; products and quotients add theirs plus 1, sums of non-negative
    terms take the largest plus 1; log1p within 1 ulp <= 2u, and log1p(y (1 + d)) = log1p(y) (1 +
    d') with |d'| <= |d| since y / (1 + y) <= log1p(y)): L = |L_mult init_L| 1, m 1, A = log1p(|c|
    n) 3, log1p(|c| m) 4, D 5, x = A / D 9, p = W1 x + b1 11 (of P), t1 = n / ((|c| n + 1) D) 9,
    t2 = A m / ((|c| m + 1) D D) 21, t1 - t2 22 (of X_c), dx/dL 20; delta_k = sum_h G W2 H, gx =
    sum_k delta W1 H + hidden (of T); a sum over the sq sk entries in any order adds sq sk - 1
    (Higham sec. 4.2). Longest chain, grad c: H + hidden + 22 + 1 + sq sk - 1; grad L_mult: H +
    hidden + 20 + 1 + sq sk - 1 + 1 (init_L); the MLP's own are shorter (W1: H + 9 + 1 + sq sk -
    1). Golden's faithful rounding adds 2u |exact| <= 2u N: K. Every order of the backends (NumPy's
    einsum / BLAS, the kernels' row-major loops, the GPU's fma contraction, which only removes
    roundings) is covered.

    C covers the decisions that a rounding may flip. The ReLU mask: the computed p_k and the exact
    one differ by at most 11u P_k, so a backend's mask can differ from the exact one only where
    |p_k| <= 22u P_k for this (NumPy) p_k and P_k > 0 (where P_k = 0, p_k = b1_k = 0 exactly and
    every mode says inactive, relu'(0) = 0). There the unit's whole delta may be missing or extra:
    C adds S_k to b1, S_k |x| to W1, S_k |W1_k| X_c to c and init_L S_k |W1_k| X_L to L_mult (W2 needs
    none: relu is 1-Lipschitz, so |a_k| errs by at most that of p_k). The tie: the computed L
    equals the exact one when L_mult init_L is exact; otherwise a row where the computed L equals
    the query position may be a tie for the backend (dm/dL = 1/2) and not for the exact value (0
    or 1): C adds init_L T X_L (with dm/dL = 1) / 2 there. sign(c), sign(L_mult) and the tie (with
    an exact L) are decided exactly, in every mode."""
    w = check_weights(weights)
    qp, kp = positions(q_positions, "q_positions"), positions(k_positions, "k_positions")
    init_L, eps = _check_config(init_L, eps)
    G = check_cotangent(G, w["W2"].shape[0], qp.size, kp.size)
    f = features(qp, kp, w, init_L=init_L, eps=eps)
    Gm = np.abs(np.moveaxis(G, 0, -1))  # [sq, sk, H]
    S = Gm @ np.abs(w["W2"])  # [sq, sk, hidden]
    P = np.abs(w["W1"][:, 0]) * np.abs(f["x"])[..., None] + np.abs(w["b1"])
    unsure = (np.abs(f["p"]) <= 22 * U * P) & (P > 0)
    N = _delta_sums(S, f, w, init_L) | {"W2": np.einsum("ijh,ijk->hk", Gm, P), "b2": Gm.sum(axis=(0, 1))}
    C = _delta_sums(S * unsure, f, w, init_L) | {"W2": 0.0, "b2": 0.0}
    if not _exact_product(w["L_multiplier"], init_L):
        tie = (f["dm_dL"] == 0.5)[:, 0]
        C["L_multiplier"] += _delta_sums(S[tie], _rows(f, tie), w, init_L, dm_dL=1.0)["L_multiplier"] / 2
    heads, hidden = w["W2"].shape
    K = (heads + hidden + qp.size * kp.size + 24) * U
    return {role: np.asarray(K * N[role] + C[role], dtype=np.float64) for role in ROLES}


def _delta_sums(S, f, w, init_L, dm_dL=None) -> dict:
    """The sums of |terms| that reach c, L_multiplier, W1 and b1 through the units' deltas, for
    delta magnitudes S [sq, sk, hidden] (vjp_bound): T X_c, init_L T X_L, S |x|, S; dm/dL as in
    ``features`` unless given."""
    ac = abs(w["c"])
    n, m, A, D = f["n"], f["m"], f["A"], f["D"]
    T = S @ np.abs(w["W1"][:, 0])
    X_c = abs(np.sign(w["c"])) * (n / ((ac * n + 1) * D) + A * m / ((ac * m + 1) * D * D))
    X_L = A * ac / ((ac * m + 1) * D * D) * (f["dm_dL"] if dm_dL is None else dm_dL)
    return {"c": np.sum(T * X_c), "L_multiplier": init_L * abs(np.sign(w["L_multiplier"])) * np.sum(T * X_L),
            "W1": np.einsum("ijk,ij->k", S, np.abs(f["x"]))[:, None], "b1": S.sum(axis=(0, 1))}


def _rows(f, rows) -> dict:
    """``features`` restricted to the query rows selected by the boolean mask ``rows``."""
    return {name: value[rows] if np.ndim(value) >= 2 else value for name, value in f.items()}


def _exact_product(a: float, b: float) -> bool:
    """a b is a double (no rounding)."""
    return Fraction(a) * Fraction(b) == Fraction(a * b)


def bias_jvp(direction: dict, q_positions, k_positions, weights, *, init_L=INIT_L, eps=EPS) -> np.ndarray:
    """J d [H, sq, sk] for a direction {role: array like the parameter} (forward mode, float64):
    dx = dx_dc dc + dx_dL sign(L_mult) init_L dL_mult, dp_k = dW1_k x + W1_k dx + db1_k,
    db_h = sum_k (dW2_hk a_k + W2_hk [p_k > 0] dp_k) + db2_h."""
    w = check_weights(weights)
    d = check_weights(direction)
    f = features(q_positions, k_positions, w, init_L=init_L, eps=eps)
    dx = f["dx_dc"] * d["c"] + f["dx_dL"] * np.sign(w["L_multiplier"]) * init_L * d["L_multiplier"]
    dp = d["W1"][:, 0] * f["x"][..., None] + w["W1"][:, 0] * dx[..., None] + d["b1"]
    out = f["a"] @ d["W2"].T + (dp * f["active"]) @ w["W2"].T + d["b2"]
    return np.moveaxis(out, -1, 0)
