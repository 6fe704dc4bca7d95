"""Error budget of ``attention.forward``: a running first-order bound, stage by stage, evaluated
on the float64 reference's intermediates (docs/tolerance.md, "Attention").

Units: u = u_T rounds every stored intermediate; t = table_roundoff(T, profile) is the unit of
the RoPE tables and the ALiBi bias (standard: float32 admitted; strict: T's own); a = min(t, u_32)
is the unit of accumulations, exp and the softmax: float32 for float16 and bfloat16 in both
profiles (every torch matmul, softmax and SDPA kernel accumulates half precision in float32;
a loop accumulating in bfloat16 itself is an accuracy fault this budget reports), float32 for a
float64 run in standard, float64 in strict; g = angle_roundoff(profile) rounds the RoPE angle
m theta. gamma(n) = n a / (1 - n a) bounds
an n-term dot product in any summation order (Higham, "Accuracy and Stability of Numerical
Algorithms", 2nd ed., eq. 3.5). Each stage's bound E is computed from the magnitudes of the exact
values plus the previous stage's bound (M = |x| + E), so the products of bounds are covered.

1. Projections (D terms):   E_q = gamma(D) |X| |W_q|^T + u |q|        (k, v likewise)
2. RoPE (pair a, b; attention factor f; position m; frequency theta):
       E_r = f (E_a + E_b) + f (2 g |m| theta + 4 t + 5 u) (M_a + M_b)
   (the angle's two roundings grow with |m| theta; cos, sin, f and their cast to T a few units;
   the two products and the sum 3 u); the tail past rotary_dim keeps E; the cache keys are inputs.
3. Logits z = (q . k) / sqrt(d) + b over the visible keys:
       E_z = (E_q . M_k + M_q . E_k) / sqrt(d) + (gamma(d) + 4 u) |q| . |k| / sqrt(d) + E_b
   (the scale, its product and the stored dot product 4 u; SDPA's sqrt(scale) on q and k alike);
   ALiBi: E_b = 4 t (|b| + B) + u (|z| + B), B = m_h max(|p_i|, |p_j|): the bias may be formed
   as m_h p_j (a per-row constant away), whose size enters the rounding.
4. Softmax p_j = e^(z_j - max) / sum: perturbing the logits by |dz_j| <= E_j changes
   log sum by at most L = log sum_j p_j e^(E_j) (Jensen's inequality below, the bound above), so
       |dp_j| <= p_j (e^(E_j + L) - 1)            exactly, not to first order,
   and the arithmetic adds the relative a |z_j - max| (the subtraction), gamma(n + 6) (exp,
   the n-term sum, the division, an online softmax's rescalings) and u (storage).
5. Output per head: E_o = sum_j E_p |v_j| + sum_j M_p E_v + gamma(n) sum_j M_p |v_j| + u |o|.
6. Output projection (hq d terms): E_out = E_o |W_o|^T + gamma(hq d) M_o |W_o|^T + u |out|.

The budget is E_out plus T's smallest subnormal. Dot2's reference error (a few ulps of float64)
is far below every term.
"""

from __future__ import annotations

import math

import numpy as np

from conformance.core import tolerance


def gamma(n, a):
    na = np.asarray(n, dtype=np.float64) * a
    return na / (1.0 - na)


def rope_budget(x, E, positions, spec, u, t, g):
    """E of rotated q or k [b, s, h, d] given x (exact, pre-rotation) and its bound E."""
    from reference import rope

    r = spec.rotary_dim or spec.head_dim
    theta, f = rope.frequencies(r, spec.base, spec.scaling, spec.seq_len or None)
    first, second = rope.pair_indices(r, spec.layout)
    M = np.abs(x) + E
    out = E.copy()
    eps = 2 * g * np.abs(positions)[:, :, None, None].astype(np.float64) * theta + 4 * t + 5 * u  # [b, s, 1, r/2]
    pair_e = f * (E[..., first] + E[..., second]) + f * eps * (M[..., first] + M[..., second])
    out[..., first] = pair_e
    out[..., second] = pair_e
    return out


def forward_budget(st: dict, spec, positions: np.ndarray, dtype: str, profile: str) -> np.ndarray:
    """float64 [b, s, D]: the budget of every output element (see the module docstring)."""
    u = tolerance.unit_roundoff(dtype)
    t = tolerance.table_roundoff(dtype, profile)
    a = min(t, tolerance.UNIT_ROUNDOFF["float32"])
    g = tolerance.angle_roundoff(profile)
    X, W = st["X"], st["W"]
    b, s, D = X.shape
    hq, hkv, d = spec.num_heads, spec.num_kv_heads, spec.head_dim
    P = st["keys"].shape[1] - s

    def proj(name, heads, exact):
        mag = (np.abs(X) @ np.abs(W[name]).T).reshape(b, s, heads, d)
        return gamma(D, a) * mag + u * np.abs(exact)

    Eq, Ek, Ev = proj("wq", hq, st["q"]), proj("wk", hkv, st["k"]), proj("wv", hkv, st["v"])
    if spec.encoding == "rope":
        Eq = rope_budget(st["q"], Eq, positions, spec, u, t, g)
        Ek = rope_budget(st["k"], Ek, positions, spec, u, t, g)
    zeros = np.zeros((b, P, hkv, d))
    Ek = np.concatenate([zeros, Ek], axis=1)
    Ev = np.concatenate([zeros, Ev], axis=1)
    heads = np.arange(hq) // (hq // hkv)
    q, keys, vals = st["qr"], st["keys"][:, :, heads], st["values"][:, :, heads]
    Ek, Ev = Ek[:, :, heads], Ev[:, :, heads]
    Mq, Mk, Mv = np.abs(q) + Eq, np.abs(keys) + Ek, np.abs(vals) + Ev
    scale = 1.0 / math.sqrt(d)
    qk = np.einsum("bihe,bjhe->bhij", np.abs(q), np.abs(keys))
    Ez = (np.einsum("bihe,bjhe->bhij", Eq, Mk) + np.einsum("bihe,bjhe->bhij", Mq, Ek)) * scale
    Ez += (gamma(d, a) + 4 * u) * qk * scale
    vis = st["vis"][:, None]  # [b, 1, s, K]
    z = st["z"]
    if spec.encoding == "alibi":
        from reference import alibi

        m = alibi.slopes(hq)[None, :, None, None]
        reach = np.maximum(np.abs(positions)[:, None, :, None],
                           np.max(np.abs(st["kpos"]), axis=1)[:, None, None, None])
        B = m * reach
        Ez += 4 * t * (np.abs(st["bias"]) + B) + u * (np.where(vis, np.abs(z), 0.0) + B)
    Ez = np.where(vis, Ez, 0.0)
    p = st["p"]
    n = vis.sum(axis=-1, keepdims=True)
    with np.errstate(over="ignore"):
        L = np.log(np.maximum(np.sum(p * np.exp(np.minimum(Ez, 700.0)), axis=-1, keepdims=True), 1.0))
        prop = np.expm1(np.minimum(Ez + L, 700.0))
    top = np.max(np.where(vis, z, -np.inf), axis=-1, keepdims=True)
    spread = np.where(vis, np.abs(z - np.where(np.isfinite(top), top, 0.0)), 0.0)
    arith = a * spread + gamma(n + 6, a) + u
    Ep = np.where(vis, p * ((1 + prop) * (1 + arith) - 1), 0.0)
    Mp = p + Ep
    absv = np.abs(vals)
    Eo = (np.einsum("bhij,bjhe->bihe", Ep, Mv) + np.einsum("bhij,bjhe->bihe", Mp, Ev)
          + gamma(n, a)[:, :, :, 0].transpose(0, 2, 1)[..., None] * np.einsum("bhij,bjhe->bihe", Mp, absv))
    Eo = Eo.reshape(b, s, hq * d) + u * np.abs(st["o"])
    Mo = np.abs(st["o"]) + Eo
    Wo = np.abs(W["wo"])
    Eout = Eo @ Wo.T + gamma(hq * d, a) * (Mo @ Wo.T) + u * np.abs(st["out"])
    return Eout + tolerance.SMALLEST_SUBNORMAL[dtype]
