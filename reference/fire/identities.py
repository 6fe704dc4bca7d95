"""FIRE identities."""

from __future__ import annotations

import numpy as np

from reference.fire import bias
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
