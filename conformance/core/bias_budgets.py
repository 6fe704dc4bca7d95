"""Budgets of the learned relative biases, shared by their families and the attention composite
(which adds a KERPLE or FIRE bias to its logits and needs the same bounds per batch row): each
takes arrays and plain parameters, not a family's spec. The derivations are in the docstrings
below; docs/tolerance.md gives them by family.
"""

from __future__ import annotations

import numpy as np

from conformance.core import tolerance
from reference.numerics.bias import kerple
from reference.numerics.bias.fire_backward import ROLES as FIRE_ROLES, features as fire_features

C_LOG_ABS, C_LOG_REL, C_POW_REL = 4, 4, 4  # KERPLE's constants (kerple_bias's derivation)


def fire_weights(params: dict) -> dict:
    """FIRE's parameters as float64 arrays, c and L_multiplier as floats (reference.fire's form)."""
    w = {r: np.asarray(params[r], dtype=np.float64) for r in FIRE_ROLES}
    return {**w, "c": float(w["c"].reshape(())), "L_multiplier": float(w["L_multiplier"].reshape(()))}


def kerple_bias(qp, kp, variant: str, r1, r2, ref, dtype: str, profile: str) -> np.ndarray:
    """[H, sq, sk]: kerple.bias's budget per entry for the unclamped parameters r1, r2 [H] and the
    reference ``ref``.

    Budget per entry, n = |i - j|, r1, r2 the clamped parameters, y the reference (first order):

    - log, y = -r1 log(1 + x), x = r2 n: n converted to the dtype (relative u: exact below 2^24 in
      float32, not past 2^11 in float16 or 2^8 in bfloat16), r2 rounded to the dtype (u), the product
      r2 n (u): each is a relative error of x, which moves log(1 + x) by at most u x / (1 + x) <= u;
      forming 1 + x before log (the code's ``log(1 + r2 n)``) moves it by u more. Then log within
      1 ulp (2u |y|), r1 rounded (u |y|) and the product (u |y|): 4 u r1 + 4 u |y|.
    - power, y = -r1 n^r2: n converted (relative u, so r2 u in n^r2), r2 rounded (relative u, so
      u r2 |ln n| in n^r2), pow within 1 ulp (2u), r1 rounded and the product (2u):
      u |y| (r2 (1 + |ln n|) + 4).

    plus the dtype's smallest subnormal.
    """
    u = tolerance.table_roundoff(dtype, profile)
    r1, r2 = kerple.clamp(variant, r1, r2)
    n = np.abs(qp[:, None] - kp[None, :])[None]
    if variant == "log":
        b = u * (C_LOG_ABS * r1[:, None, None] + C_LOG_REL * np.abs(ref))
    else:
        log_n = np.log(np.maximum(n, 1.0))
        b = u * np.abs(ref) * (r2[:, None, None] * (1.0 + log_n) + C_POW_REL)
    return b + tolerance.SMALLEST_SUBNORMAL[dtype]


def fire_bias(qp, kp, w: dict, init_L: float, eps: float, ref, dtype: str, profile: str,
              features=None) -> np.ndarray:
    """[H, sq, sk]: fire.bias's budget per entry for the weights ``w`` (reference.fire's form) and
    the reference ``ref``; ``features`` = (psi_n [sq, sk], norm [sq, 1]) of another formula (a
    diagnosis candidate's) in place of FIRE's own.

    Budget per entry, first order in u (the dtype's table roundoff: standard admits float32
    intermediates, strict the dtype's own), with n = |i - j|, psi_n = psi(n), N = psi(max(i, L)) + eps,
    x = psi_n / N, p_k = W1_k x + b1_k, h_k = relu(p_k):

    - psi(n) = log(|c n| + 1): n converted to the dtype, the product c n (a relative error u each; a
      relative error of the argument a moves log(1 + a) by at most u a / (1 + a) <= u), the sum + 1
      (u, absolute, in the log), log within 1 ulp (2u psi_n): 3u + 2u psi_n. N likewise, with the
      threshold's product L_multiplier * init_L (u) in place of the conversion, and the sum + eps
      (u N): 3u + 3u N. The division (u x): err_x = u (3 (1 + x) / N + 6 x).
    - p_k: |W1_k| err_x, the product and the sum: 2u |W1_k x| + u |b1_k|; ReLU passes the error
      unchanged (Lipschitz 1, so the kink costs nothing beyond the pre-activation's error).
    - the output sum_k W2_hk h_k + b2_h: sum_k |W2_hk| err_p_k, plus (hidden + 1) a (sum_k |W2_hk h_k| +
      |b2_h|) for the products and the sum in any order, a the accumulation unit
      (conformance.core.tolerance.accumulation_roundoff: float32 for half dtypes, as nn.Linear
      accumulates), plus u |out| for rounding to the dtype;
    - plus the dtype's smallest subnormal.
    """
    u = tolerance.table_roundoff(dtype, profile)
    a = tolerance.accumulation_roundoff(dtype, profile)
    if features is None:
        L = abs(w["L_multiplier"] * init_L)
        c = abs(w["c"])
        features = (np.log1p(c * np.abs(qp[:, None] - kp[None, :])), np.log1p(c * np.maximum(qp, L))[:, None] + eps)
    psi_n, norm = features
    x = np.abs(psi_n / norm)
    err_x = u * (3 * (1 + x) / norm + 6 * x)
    w1, b1 = np.abs(w["W1"][:, 0]), np.abs(w["b1"])
    err_p = w1 * err_x[..., None] + 2 * u * w1 * x[..., None] + u * b1  # [sq, sk, hidden]
    h = np.maximum(w["W1"][:, 0] * x[..., None] + w["b1"], 0.0)
    w2 = np.abs(w["W2"])
    total = np.moveaxis(err_p @ w2.T + (w["W1"].shape[0] + 1) * a * (h @ w2.T + np.abs(w["b2"])), -1, 0)
    return total + u * np.abs(ref) + tolerance.SMALLEST_SUBNORMAL[dtype]


def fire_gradients(qp, kp, w: dict, G: np.ndarray, graded: np.ndarray, init_L: float, eps: float, dtype: str,
                   profile: str) -> dict:
    """{role: budget shaped like the parameter}: the gradients of fire.bias's six parameters for the
    cotangent G [H, sq, sk] on the ``graded`` entries [sq, sk].

    Budget, per gradient element, first order in u = u_tab (the dtype's table roundoff: standard
    admits float32 intermediates, strict the dtype's own; the module computes the feature in
    float32, or float64 for a float64 model, never coarser than u) for each value rounded to T, and
    a = the accumulation unit (conformance.core.tolerance.accumulation_roundoff: float32 for half
    dtypes, as torch's matmuls and sums accumulate) for the additions of a sum: a sum of n terms
    with k roundings to T around it costs n a + k u of its terms' magnitudes. Notation as fire.bias's budget:
    n = |i - j|, A = psi(n), D = psi(max(i, L)) + eps, x = A / D, p_k = W1_k x + b1_k, with the
    forward's errors e_A = 3u + 2u A, e_D = 3u + 3u D, err_x = u (3 (1 + x) / D + 6 x) and
    err_p_k = |W1_k| err_x + 2u |W1_k x| + u |b1_k|; n_e the number of graded entries (the sums over
    entries run over them, in any order: recursive summation's gamma_{n_e}, Higham sec. 4.2).
    Autograd through the module (Linear -> ReLU -> Linear in T, the feature in float32) computes:

    - delta_k = [p_k > 0] sum_h G_hk W2_hk (G W2 over H heads, then the ReLU mask of the *computed*
      p_k): magnitude S_k = sum_h |G_h W2_hk|, error (H a + u) S_k where p_k > 0; where
      |p_k| <= err_p_k the mask may differ from the exact one (the kink): error S_k there.
    - grad_b2 = sum_ij G: (n_e a + 2 u) sum |G|.
    - grad_W2 = sum_ij G a_k: sum |G| (err_p_k + (n_e a + 2 u) |a_k|) (a_k carries the forward's error).
    - grad_b1 = sum_ij delta_k: its errors plus (n_e a + 2 u) sum S_k.
    - grad_W1 = sum_ij delta_k x_T: its errors times |x|, S_k (err_x + u |x|) (x rounded to T),
      (n_e a + 3 u) sum S_k |x|.
    - gx = sum_k delta_k W1_k (the feature's gradient, cast to float32): magnitude S_x = sum_k S_k
      |W1_k| over the units active or at the kink, error E_x = sum_k |W1_k| err_delta_k + (hidden a
      + 2 u) S_x; the computed gx is at most g_x = |gx| + E_x in size.
    - grad_c = sum_ij gx sign(c) (t1 - t2), t1 = n / ((|c| n + 1) D), t2 = A t2', t2' = m / ((|c| m
      + 1) D^2): error sum_ij [E_x |t1 - t2| (gx's error goes down both paths) + g_x (|t1| (e_D / D
      + 8u) + e_A t2' + |t2| (2 e_D / D + 10u))] + (n_e a + 4 u) sum_ij g_x (|t1| + |t2|) (the
      backward's log, abs, mul and div steps
      round a few times each, with D's and A's own errors; the sums over entries, over keys for the
      normalizer, and the cast to c's dtype). The two paths (through psi(n) and through the
      normalizer) are summed separately, so the bound is relative to |t1| + |t2|, not to their
      difference: c's gradient is ill-conditioned where they nearly cancel (small D: L close to 0).
    - grad_L_multiplier = -init_L sign(L_mult) sum_ij gx t_L dm/dL, t_L = A |c| / ((|c| m + 1) D^2):
      likewise with e_A |c| / ((|c| m + 1) D^2) and |t_L| (2 e_D / D + 10u), (n_e a + 5 u); at a tie
      i = L any one-sided convention (torch.clamp(min=L) gives 0, torch.where 1, torch.max 1/2) is a
      valid subgradient, so each row i = L adds half its exact one-sided contribution,
      |sum_j gx t_L| / 2 (and its errors counted in full).
    - plus (n_e + hidden + H + 10) times the dtype's smallest subnormal.
    """
    f = fire_features(qp, kp, w, init_L=init_L, eps=eps)
    u = tolerance.table_roundoff(dtype, profile)
    a = tolerance.accumulation_roundoff(dtype, profile)
    A, D, x, m, n = f["A"], f["D"], f["x"], f["m"], f["n"]
    ac = abs(w["c"])
    w1, b1 = np.abs(w["W1"][:, 0]), np.abs(w["b1"])
    heads, hidden = w["W2"].shape
    e_A, e_D = 3 * u + 2 * u * A, 3 * u + 3 * u * D
    err_x = u * (3 * (1 + x) / D + 6 * x)
    err_p = w1 * err_x[..., None] + 2 * u * w1 * np.abs(x)[..., None] + u * b1  # [sq, sk, hidden]
    active = f["active"]
    kink = np.abs(f["p"]) <= err_p
    n_e = int(graded.sum())
    Gm = np.moveaxis(np.abs(G) * graded[None], 0, -1)  # [sq, sk, H]
    S = Gm @ np.abs(w["W2"])  # [sq, sk, hidden]
    err_delta = (heads * a + u) * S * active + S * kink
    live = active | kink
    S_x = (S * live) @ w1
    E_x = err_delta @ w1 + (hidden * a + 2 * u) * S_x
    # |gx| (exact, float64) plus its error bounds the gradient the feature's backward receives
    gx = ((np.moveaxis(G * graded[None], 0, -1) @ w["W2"]) * active) @ w["W1"][:, 0]
    g_x = np.abs(gx) + E_x
    t1 = n / ((ac * n + 1) * D)
    t2p = m / ((ac * m + 1) * D * D)
    t2 = A * t2p
    tLp = ac / ((ac * m + 1) * D * D)
    tL = A * tLp
    rel_D = e_D / D
    c_err = E_x * np.abs(t1 - t2) + g_x * (t1 * (rel_D + 8 * u) + e_A * t2p + t2 * (2 * rel_D + 10 * u)) \
        + (n_e * a + 4 * u) * g_x * (t1 + t2)
    dm = f["dm_dL"]  # [sq, 1]: 1 below L, 1/2 at a tie, 0 past it
    tie = (dm == 0.5)[:, 0]
    # any convention at a tie: the rows i = L may carry 0 to 1 times their one-sided derivative
    L_err = np.sum((E_x * tL + g_x * (e_A * tLp + tL * (2 * rel_D + 10 * u)) + (n_e * a + 5 * u) * g_x * tL) * (dm > 0)) \
        + 0.5 * np.sum(np.abs(np.sum(gx * tL, axis=1))[tie])
    floor = (n_e + hidden + heads + 10) * tolerance.SMALLEST_SUBNORMAL[dtype]
    out = {
        "c": np.array(np.sum(c_err)),
        "L_multiplier": np.array(np.sum(L_err) * init_L),
        "W1": (np.einsum("ijk,ij->k", err_delta, np.abs(x)) + np.einsum("ijk,ij->k", S * live, err_x + u * np.abs(x))
               + (n_e * a + 3 * u) * np.einsum("ijk,ij->k", S * active, np.abs(x)))[:, None],
        "b1": (err_delta + (n_e * a + 2 * u) * S * active).sum(axis=(0, 1)),
        "W2": np.einsum("ijh,ijk->hk", Gm, err_p + (n_e * a + 2 * u) * f["a"]),
        "b2": (n_e * a + 2 * u) * Gm.sum(axis=(0, 1)),
    }
    return {role: b + floor for role, b in out.items()}
