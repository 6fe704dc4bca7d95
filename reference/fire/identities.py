"""FIRE identities."""

from __future__ import annotations

import numpy as np

from reference.fire import bias
from reference.fire.backward import bias_jvp, bias_vjp, features
from reference.identities import register


def _weights(heads=4, hidden=32, seed=11, lm=1.0, monotone=False) -> dict:
    rng = np.random.default_rng(seed)
    w = {"c": 0.1, "L_multiplier": lm, "W1": rng.uniform(-1, 1, (hidden, 1)), "b1": rng.uniform(-1, 1, hidden),
         "W2": rng.uniform(-0.2, 0.2, (heads, hidden)), "b2": rng.uniform(-0.2, 0.2, heads)}
    if monotone:
        w["W1"], w["W2"] = np.abs(w["W1"]), np.abs(w["W2"])
    return w


@register(id="fire.distance-only-below-threshold", bound=0.0,
          statement="for query positions up to L the bias depends on i - j only (the normalizer is psi(L)): "
          "shifting queries and keys together, queries staying at or below L = 512, changes no value")
def distance_only_below_threshold() -> float:
    """Residual: max |b(q + s, k + s) - b(q, k)| (fast mode, cpu) for queries <= L. Bound 0: the
    kernel forms the integer |i - j| and the normalizer psi(max(i, L)) = psi(L) for every such row,
    so the same float operations run on the same operands."""
    w = _weights()
    q, k = np.arange(0, 12, 2), np.arange(0, 12)
    ref = bias(q, k, w, backend="cpu")
    return max(float(np.max(np.abs(bias(q + s, k + s, w, backend="cpu") - ref))) for s in (1, 100, 500))


@register(id="fire.normalizer-above-threshold", bound=0.0,
          statement="for a query at or past L the normalizer is psi(i): the bias equals that of the same "
          "weights with the threshold moved up to L' = i (init_L = i, L_multiplier = 1)")
def normalizer_above_threshold() -> float:
    """Residual: max |b_L(i, j) - b_{L'=i}(i, j)| for i in 512..4096 (fast mode, cpu). Bound 0:
    max(i, L) = max(i, i) = i exactly, |1 * i| is exact, so both compute the same operations."""
    w = _weights()
    k = np.array([0, 1, 7, 300, 511])
    worst = 0.0
    for i in (512, 513, 1000, 4095, 4096):
        base = bias(np.array([i]), k, w, backend="cpu")
        moved = bias(np.array([i]), k, {**w, "L_multiplier": 1.0}, init_L=float(i), backend="cpu")
        worst = max(worst, float(np.max(np.abs(base - moved))))
    return worst


@register(id="fire.monotone-mlp-monotone-bias", bound=0.0,
          statement="with W1 >= 0 and W2 >= 0 the bias is non-decreasing in the distance i - j for a fixed "
          "query (queries 5, 300 below L and 4095 past it, distances 0..40)")
def monotone() -> float:
    """Residual: the largest decrease b(i, i - n) - b(i, i - n - 1) over n (golden values; 0 when
    none decreases). Bound 0: psi(n) grows with n and the normalizer is fixed per query, so x grows;
    relu(W1 x + b1) with W1 >= 0 and then W2 >= 0 keep the order; golden values are the nearest
    doubles to the exact ones, and rounding to nearest is monotone."""
    w = _weights(monotone=True)
    worst = 0.0
    for i in (5, 300, 4095):
        k = np.arange(i, max(i - 41, -1), -1)  # distances 0, 1, 2, ...
        b = bias(np.array([i]), k, w, mode="golden")[:, 0, :]
        worst = max(worst, float(np.max(-np.diff(b, axis=-1), initial=0.0)))
    return max(worst, 0.0)


# ---- the backward pass (reference/numerics/bias/fire_backward.py) --------------------------------

# (queries, keys, L_multiplier, init_L): below the threshold, past it (decode), and L = 4 inside the
# square (a tie at query 4, where torch.max splits the gradient).
BACKWARD_CASES = ((np.arange(6), np.arange(6), 1.0, 512.0), (np.array([4095]), np.arange(0, 4096, 512), 1.0, 512.0),
                  (np.arange(8), np.arange(8), 2.0**-7, 512.0))


def adjoint_terms(G, qp, kp, w, d, init_L) -> tuple[float, int]:
    """(N, K): N = sum_hij |G_hij| [|db2_h| + sum_k (|dW2_hk| a_k + |W2_hk| [p_k > 0] (|dW1_k| |x| + |W1_k|
    (|dx_dc| |dc| + |dx_dL| init_L |dL_mult|) + |db1_k|))], the size of every term on either side, and
    the derived count K = 2 hidden + H + sq sk + 20."""
    f = features(qp, kp, w, init_L=init_L)
    dx = np.abs(f["dx_dc"]) * abs(d["c"]) + np.abs(f["dx_dL"]) * init_L * abs(d["L_multiplier"])
    dp = np.abs(d["W1"][:, 0]) * np.abs(f["x"])[..., None] + np.abs(w["W1"][:, 0]) * dx[..., None] + np.abs(d["b1"])
    per = f["a"] @ np.abs(d["W2"]).T + (dp * f["active"]) @ np.abs(w["W2"]).T + np.abs(d["b2"])
    heads, hidden = w["W2"].shape
    return float(np.sum(np.abs(G) * np.moveaxis(per, -1, 0))), 2 * hidden + heads + qp.size * kp.size + 20


@register(id="fire.backward-adjoint", bound=1.0,
          statement="the VJP is the adjoint of the forward-mode JVP: sum over c, L_multiplier, W1, b1, W2, b2 of "
          "<grad, d> = <G, J d> (queries below the threshold, a decode query past it, and a tie i = L), within "
          "the derived bound K u N")
def backward_adjoint() -> float:
    """Residual: max over the cases of |lhs - rhs| / (K u N) (adjoint_terms). Bound 1.

    Derivation: both sides use the same float64 features (x, the ReLU mask, dx/dc, dx/dL), so only
    the linear algebra is compared; every term of either side is a product whose absolute value is
    a term of N. lhs (bias_vjp): the sums over heads (H), hidden units (hidden) and entries
    (sq sk), at most 4 products, and the fsum with d (2u): H + hidden + sq sk + 6. rhs (bias_jvp):
    dx (3), dp (4), the sum over hidden units and its product, the two other terms (2), the product
    with G and the fsum (2): hidden + 12. Together at most K = 2 hidden + H + sq sk + 20, first order."""
    import math


    rng = np.random.default_rng(20260116)
    worst = 0.0
    for qp, kp, lm, init_L in BACKWARD_CASES:
        w = _weights(lm=lm)
        d = _weights(seed=int(rng.integers(1 << 30)), lm=0.5)
        d["c"] = 0.25
        G = rng.uniform(-2, 2, (w["W2"].shape[0], qp.size, kp.size))
        grads = bias_vjp(G, qp, kp, w, init_L=init_L)
        lhs = math.fsum(float(p) for r, g in grads.items() for p in (np.asarray(g) * d[r]).reshape(-1))
        rhs = math.fsum((G * bias_jvp(d, qp, kp, w, init_L=init_L)).reshape(-1).tolist())
        N, K = adjoint_terms(G, qp, kp, w, d, init_L)
        worst = max(worst, abs(lhs - rhs) / (K * 2.0**-53 * N))
    return worst
