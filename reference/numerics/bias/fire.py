"""FIRE bias: argument checks, the normalized distance, fast and golden modes. The formula and API are
reference.fire's (its docstring states them); shared with the attention composite, which adds this
bias to its logits and differentiates it (fire_backward.py)."""

from __future__ import annotations

import math
import numbers

import mpmath
import numpy as np

from reference.golden.certify import nearest_double
from reference.numerics.log1p import log1p_product
from reference.numerics.validate import check_backend, check_mode

INIT_L = 512.0
EPS = 1e-6
ROLES = ("c", "L_multiplier", "W1", "b1", "W2", "b2")
MAX_POSITION = 2**40
# cpu fast mode from this much work (output values x hidden units) on: the MLP's exact linear
# segments (fire_golden.py, without the rounding test), about 100 flops per entry against the
# 2 hidden (1 + heads) of the unit-by-unit kernel, once the segments' setup (~1.5 ms at 4 heads of
# 32 units) is paid for (issue 31); below, fire_cpu_kernels.py.
SEGMENT_MIN_WORK = 1 << 23


def _scalar(name, v) -> float:
    a = np.asarray(v, dtype=np.float64) if not isinstance(v, (str, bytes, bool)) else None
    if a is None or a.size != 1 or not np.isfinite(a).all():
        raise ValueError(f"{name}: must be one finite number, got {v!r}")
    return float(a.reshape(()))


def check_weights(weights) -> dict:
    """float64 arrays: c, L_multiplier (floats), W1 [hidden, 1], b1 [hidden], W2 [H, hidden], b2 [H]."""
    if not isinstance(weights, dict) or set(weights) != set(ROLES):
        raise ValueError(f"weights: must be a dict with exactly the keys {ROLES}")
    w = {"c": _scalar("c", weights["c"]), "L_multiplier": _scalar("L_multiplier", weights["L_multiplier"])}
    for role in ROLES[2:]:
        a = np.asarray(weights[role], dtype=np.float64)
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{role}: must hold finite numbers")
        w[role] = a
    hidden = w["b1"].shape[0] if w["b1"].ndim == 1 else -1
    heads = w["b2"].shape[0] if w["b2"].ndim == 1 else -1
    if hidden < 1 or w["W1"].shape != (hidden, 1):
        raise ValueError(f"W1: must have shape [hidden, 1] with hidden = len(b1) >= 1, got {list(w['W1'].shape)}")
    if heads < 1 or w["W2"].shape != (heads, hidden):
        raise ValueError(f"W2: must have shape [heads, hidden] = [{heads}, {hidden}], got {list(w['W2'].shape)}")
    return w


def positions(p, name) -> np.ndarray:
    a = np.asarray(p)
    if a.ndim != 1 or a.dtype.kind not in "iu" or (a.size and (a.min() < 0 or a.max() > MAX_POSITION)):
        raise ValueError(f"{name}: must be a 1-D integer array of 0-based positions <= 2**40")
    return a.astype(np.int64)


def _check_config(init_L, eps) -> tuple[float, float]:
    for name, v in (("init_L", init_L), ("eps", eps)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name}: must be a positive finite number, got {v!r}")
    return float(init_L), float(eps)


def scale_length(w, init_L) -> float:
    """L = |L_multiplier init_L|, refused (one line) where the product overflows float64."""
    L = abs(w["L_multiplier"] * init_L)
    if not math.isfinite(L):
        raise ValueError(f"L_multiplier: |L_multiplier * init_L| must be a finite float64, got "
                         f"{w['L_multiplier']!r} * {init_L!r}")
    return L



def normalized_distance(qp, kp, c, L, eps) -> np.ndarray:
    """x [sq, sk] = psi(i - j) / (psi(max(i, L)) + eps), float64 with log1p (psi overflow-safe)."""
    d = np.abs(qp[:, None] - kp[None, :]).astype(np.float64)
    n = np.maximum(qp.astype(np.float64), L)[:, None]
    return log1p_product(abs(c), d) / (log1p_product(abs(c), n) + eps)


def fast_bound(qp, kp, weights, *, init_L=INIT_L, eps=EPS) -> np.ndarray:
    """[H, sq, sk]: the fast mode's error bound, u = 2^-53: (hidden + 12) u S with
    S = sum_k |W2_hk| (|W1_k x| + |b1_k|) + |b2_h|. The normalized distance x carries at most 8u
    relative (two log1p of 1 ulp, the products c n with their relative error passing through
    log1p damped, the eps sum and the division; where |c| n overflows, psi = ln |c| + ln n has
    two logs of 1 ulp on non-negative terms and their sum, 3u as on the log1p path), so each
    pre-activation W1_k x + b1_k errs by at most 10u (|W1_k x| + |b1_k|), ReLU passing errors
    unchanged; the dot product of hidden terms plus b2 adds (hidden + 1) u times its absolute
    sum; the output's rounding u."""
    w = check_weights(weights)
    qp, kp = positions(qp, "q_positions"), positions(kp, "k_positions")
    L = scale_length(w, init_L)
    x = np.abs(normalized_distance(qp, kp, w["c"], L, eps))[..., None]
    s = (np.abs(w["W1"][:, 0]) * x + np.abs(w["b1"])) @ np.abs(w["W2"]).T + np.abs(w["b2"])
    return (w["b1"].size + 12) * 2.0**-53 * np.moveaxis(s, -1, 0)


def _mp_weights(w, init_L, eps) -> dict:
    """The weights as mpf (exact), L = |L_multiplier init_L| exact; call at workprec(200)."""
    mp = lambda v: mpmath.mpf(float(v))  # noqa: E731
    return {"c": mp(w["c"]), "L": abs(mp(w["L_multiplier"]) * mp(init_L)), "eps": mp(eps),
            "w1": [mp(v) for v in w["W1"][:, 0]], "b1": [mp(v) for v in w["b1"]],
            "w2": [[mp(v) for v in row] for row in w["W2"]], "b2": [mp(v) for v in w["b2"]]}


def _mp_norm(m, p):
    return mpmath.log1p(abs(m["c"] * max(mpmath.mpf(p), m["L"]))) + m["eps"]


def _mp_entry(m, norm, p, r) -> list:
    """The H golden values at query position p, key position r (at workprec(200))."""
    x = mpmath.log1p(abs(m["c"] * (p - r))) / norm
    act = [max(w1 * x + b1, 0) for w1, b1 in zip(m["w1"], m["b1"])]  # the exact pre-activation's sign
    return [nearest_double(mpmath.fsum(w2[k] * act[k] for k in range(len(act))) + b2)
            for w2, b2 in zip(m["w2"], m["b2"])]


def _golden_mp(w, qp, kp, init_L, eps) -> np.ndarray:
    """Golden mode in mpmath, every entry (the definition; used outside the quick phase's domain)."""
    out = np.empty((w["W2"].shape[0], qp.size, kp.size))
    with mpmath.workprec(200):
        m = _mp_weights(w, init_L, eps)
        for i, p in enumerate(qp.tolist()):
            norm = _mp_norm(m, p)
            for j, r in enumerate(kp.tolist()):
                out[:, i, j] = _mp_entry(m, norm, p, r)
    return out


def _golden(w, qp, kp, init_L, eps) -> np.ndarray:
    """Golden bias: the quick phase (fire_golden.py) where its domain holds, mpmath for the
    entries whose rounding it cannot certify (NaN there) and everywhere outside the domain."""
    from . import fire_golden  # numba start-up: imported on first use

    if not fire_golden.in_domain(w, init_L, eps):
        return _golden_mp(w, qp, kp, init_L, eps)
    out, bad = fire_golden.quick(w, qp, kp, init_L, eps)
    rows = np.nonzero(bad)[0]
    if rows.size:
        with mpmath.workprec(200):
            m = _mp_weights(w, init_L, eps)
            for i in rows:
                p = int(qp[i])
                norm = _mp_norm(m, p)
                for j in np.nonzero(np.isnan(out[:, i, :]).any(axis=0))[0]:
                    out[:, i, j] = _mp_entry(m, norm, p, int(kp[j]))
    return out


def bias(q_positions, k_positions, weights, *, init_L=INIT_L, eps=EPS, backend="cpu", mode="fast") -> np.ndarray:
    """[H, sq, sk]: MLP_h(psi(i - j) / (psi(max(i, L)) + eps)) (see __init__). Causal callers
    ignore the entries j > i; the formula takes |i - j| there."""
    w = check_weights(weights)
    qp, kp = positions(q_positions, "q_positions"), positions(k_positions, "k_positions")
    init_L, eps = _check_config(init_L, eps)
    backend, mode = check_backend(backend), check_mode(mode)
    L = scale_length(w, init_L)
    if mode == "golden":
        return _golden(w, qp, kp, init_L, eps)
    if backend == "numpy":
        x = normalized_distance(qp, kp, w["c"], L, eps)[..., None]
        act = np.maximum(w["W1"][:, 0] * x + w["b1"], 0.0)
        return np.moveaxis(act @ w["W2"].T + w["b2"], -1, 0)
    if backend == "cpu":
        from . import fire_cpu_kernels as kernels  # numba start-up: imported on first use
        from . import fire_golden  # numba start-up: imported on first use

        heads, hidden = w["W2"].shape
        if heads * qp.size * kp.size * hidden >= SEGMENT_MIN_WORK and fire_golden.in_domain(w, init_L, eps):
            return fire_golden.quick(w, qp, kp, init_L, eps, certify=False)[0]
    else:
        from . import fire_cuda_kernels as kernels  # numba start-up: imported on first use
    return kernels.bias(qp, kp, w["c"], L, eps, np.ascontiguousarray(w["W1"][:, 0]), w["b1"], w["W2"], w["b2"])
