"""Error budget of ``attention.forward``: a running first-order bound, stage by stage, evaluated
on the float64 reference's intermediates (docs/tolerance.md, "Attention"). It is the budget of
float32 and float64 outputs and the start of every gradient budget; float16 and bfloat16 outputs
get conformance.attention.half's bound instead (forward_budget), because this one, adding
absolute values at every stage, is as wide as the output itself there.

Units: u = u_T rounds every stored intermediate; t = table_roundoff(T, profile) is the unit of
the RoPE tables and the ALiBi bias (standard: float32 admitted; strict: T's own); a = min(t, u_32)
(tolerance.accumulation_roundoff) is the unit of accumulations, exp and the softmax: float32 for float16 and bfloat16 in both
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
   as m_h p_j (a per-row constant away), whose size enters the rounding. The other biases
   (bias_logit_error): the family's own forward budget in the table unit t, plus the bias's cast to
   T and its sum with the scaled dot product, u (|b| + |z|): KERPLE conformance.kerple.bias.budget
   (log: 4 t r1 + 4 t |b|; power: t |b| (r2 (1 + ln n) + 4)), FIRE conformance.fire.bias.budget
   (the normalized distance, the pre-activations, the MLP's dot product and its storage), T5 0
   (an exact lookup in a table given in T).
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


import numpy as np

from conformance.attention.bias_budgets import bias_logit_error
from conformance.attention.half import half_budget, is_half
from conformance.attention.stages import reference_config
from conformance.core import bias_budgets, tolerance
from reference.attention import backward as ref_backward
from reference.numerics.bias.fire import EPS, INIT_L
from reference.numerics.bias.fire_backward import features
from reference.numerics.frequencies import frequencies
from reference.numerics.layouts import pair_indices


def gamma(n, a):
    na = np.asarray(n, dtype=np.float64) * a
    return na / (1.0 - na)


def rope_budget(x, E, positions, spec, u, t, g):
    """E of rotated q or k [b, s, h, d] given x (exact, pre-rotation) and its bound E."""
    r = spec.rotary_dim or spec.head_dim
    theta, f = frequencies(r, spec.base, spec.scaling, spec.seq_len or None)
    first, second = pair_indices(r, spec.layout)
    M = np.abs(x) + E
    out = E.copy()
    eps = 2 * g * np.abs(positions)[:, :, None, None].astype(np.float64) * theta + 4 * t + 5 * u  # [b, s, 1, r/2]
    pair_e = f * (E[..., first] + E[..., second]) + f * eps * (M[..., first] + M[..., second])
    out[..., first] = pair_e
    out[..., second] = pair_e
    return out


def forward_budget(st: dict, spec, positions: np.ndarray, dtype: str, profile: str) -> np.ndarray:
    """float64 [b, s, D]: the budget of every output element: in float16 and bfloat16 the
    probabilistic first-order bound of conformance.attention.half (this module's worst-case bound
    is as wide as the output there), otherwise the running bound of the module docstring."""
    if is_half(dtype):
        return half_budget(st, spec, positions, dtype, profile)
    return forward_bounds(st, spec, positions, dtype, profile)["out"] + tolerance.SMALLEST_SUBNORMAL[dtype]


def softmax_error(p, z, vis, Ez, a, u):
    """E_p [.., s, K], step 4 of the module docstring: the probabilities p of logits z (-inf where
    not visible) under logit errors up to Ez, visibility vis, accumulation unit a, storage unit u."""
    Ez = np.where(vis, Ez, 0.0)
    n = vis.sum(axis=-1, keepdims=True)
    with np.errstate(over="ignore"):
        L = np.log(np.maximum(np.sum(p * np.exp(np.minimum(Ez, 700.0)), axis=-1, keepdims=True), 1.0))
        prop = np.expm1(np.minimum(Ez + L, 700.0))
    top = np.max(np.where(vis, z, -np.inf), axis=-1, keepdims=True)
    spread = np.where(vis, np.abs(z - np.where(np.isfinite(top), top, 0.0)), 0.0)
    arith = a * spread + gamma(n + 6, a) + u
    return np.where(vis, p * ((1 + prop) * (1 + arith) - 1), 0.0)


def forward_bounds(st: dict, spec, positions: np.ndarray, dtype: str, profile: str) -> dict:
    """The running bounds of every stage (module docstring): q [b, s, hq, d] (rotated), keys and
    values [b, P + s, hq, d] (per query head; the cache's are 0), p [b, hq, s, P + s], o
    [b, s, hq d], out [b, s, D] (without the subnormal floor); the gradient budget starts from them."""
    u = tolerance.unit_roundoff(dtype)
    t = tolerance.table_roundoff(dtype, profile)
    a = tolerance.accumulation_roundoff(dtype, profile)
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
    scale = spec.scale
    qk = np.einsum("bihe,bjhe->bhij", np.abs(q), np.abs(keys))
    Ez = (np.einsum("bihe,bjhe->bhij", Eq, Mk) + np.einsum("bihe,bjhe->bhij", Mq, Ek)) * scale
    Ez += (gamma(d, a) + 4 * u) * qk * scale
    vis = st["vis"][:, None]  # [b, 1, s, K]
    z = st["z"]
    Eb = bias_logit_error(st, spec, positions, dtype, profile)
    if Eb is not None:
        Ez += Eb
    Ez = np.where(vis, Ez, 0.0)
    p = st["p"]
    n = vis.sum(axis=-1, keepdims=True)
    Ep = softmax_error(p, z, vis, Ez, a, u)
    Mp = p + Ep
    absv = np.abs(vals)
    Eo = (np.einsum("bhij,bjhe->bihe", Ep, Mv) + np.einsum("bhij,bjhe->bihe", Mp, Ev)
          + gamma(n, a)[:, :, :, 0].transpose(0, 2, 1)[..., None] * np.einsum("bhij,bjhe->bihe", Mp, absv))
    Eo = Eo.reshape(b, s, hq * d) + u * np.abs(st["o"])
    Mo = np.abs(st["o"]) + Eo
    Wo = np.abs(W["wo"])
    Eout = Eo @ Wo.T + gamma(hq * d, a) * (Mo @ Wo.T) + u * np.abs(st["out"])
    return {"q": Eq, "keys": Ek, "values": Ev, "p": Ep, "o": Eo, "out": Eout}


def _group(x, hq, hkv):
    """[b, K, hq, d] -> [b, K, hkv, d]: the sum over the query heads of each kv head."""
    b, K, _, d = x.shape
    return x.reshape(b, K, hkv, hq // hkv, d).sum(axis=3)


def gradient_budget(st: dict, spec, positions, g, back: dict, grads: dict, dtype: str, profile: str) -> dict:
    """{role: float64 budget} of the gradients of hidden, wq, wk, wv, wo: a running bound through
    the backward (docs/tolerance.md, "Attention gradients"), started from the forward's stage
    bounds (forward_bounds) and evaluated on the reference backward's intermediates ``back``
    (reference.attention.backward.vjp_from_stages(keep=...)) and gradients ``grads``; g the
    cotangent as the backward received it (exact: no bound). Units as the forward's; M = |x| + E.

      dO = g W_o:         E_dO = gamma(D) |g| |W_o| + u |dO|
      dW_o = g^T o:       E = |g|^T E_o + gamma(b s) |g|^T M_o + u |dW_o|
      dV = P^T dO:        E = sum (E_p M_dO + M_p E_dO) + gamma(s hq/hkv) sum M_p M_dO + u |dV|
      dP = dO . v:        E = E_dO . M_v + |dO| . E_v + gamma(d) |dO| . |v| + u |dP|
      delta:              the larger of rowsum(dO o o): E_dO . M_o + |dO| . E_o + gamma(d) |dO| . |o|
                          and sum_j P dP: sum (E_p M_dP + p E_dP) + gamma(n) sum M_p |dP|; + u |delta|
      dS = P (dP - delta): E = M_p (E_dP + E_delta) + E_p |dP - delta| + 3 u M_p (|dP - delta| + E_dP + E_delta)
                          (the difference, the product, the store)
      dZ = dS / sqrt(d):  E = (E_dS + 2 u (|dS| + E_dS)) / sqrt(d)        (the scale and its product)
      dQr = dZ k:         E = sum_j (E_dZ M_k + |dZ| E_k) + gamma(n) sum_j |dZ| |k| + u |dQr|
      dKr = dZ^T q:       likewise over the s hq/hkv (query, head) pairs of each kv head
      RoPE's VJP:         the forward's per-pair bound (rope_budget) on dQr, dKr: f R_{-m} turns by
                          the same angles, |(-m) theta| = |m theta|
      dX = dQ W_q + dK W_k + dV W_v:  E = sum E_dx |W_x| + gamma(hq d + 2 hkv d + 2) sum M_dx |W_x| + u |dX|
      dW_x = dx^T X:      E = E_dx^T |X| + gamma(b s) M_dx^T |X| + u |dW_x|
    The bias's parameters (bias_gradient_budget), from E_dS and M_dS = |dS| + E_dS:
      T5 rel_bias[t, h] = sum of the n_t dS over bucket t:  E = sum E_dS + gamma_T(n_t) sum M_dS + u |grad|
      FIRE's MLP: conformance.core.bias_budgets.fire_gradients (cotangent dS per row) + the VJP's magnitude of
                  the cotangent's error E_dS + gamma(b) M_dS (the rows summed before or after)
    Budget = E + T's smallest subnormal."""
    u = tolerance.unit_roundoff(dtype)
    t = tolerance.table_roundoff(dtype, profile)
    a = tolerance.accumulation_roundoff(dtype, profile)
    ang = tolerance.angle_roundoff(profile)
    fw = forward_bounds(st, spec, positions, dtype, profile)
    X, W = st["X"], st["W"]
    b, s, D = X.shape
    hq, hkv, d = spec.num_heads, spec.num_kv_heads, spec.head_dim
    K = st["keys"].shape[1]
    P = K - s
    grp = s * (hq // hkv)
    heads = np.arange(hq) // (hq // hkv)
    vis = st["vis"][:, None]
    n = vis.sum(axis=-1, keepdims=True)  # [b, 1, s, 1]
    gn = gamma(n, a)[:, 0, :, 0][:, :, None, None]  # gamma(n) per query [b, s, 1, 1]
    G = np.abs(g)
    p, Ep = st["p"], fw["p"]
    Mp = p + Ep
    o = st["o"].reshape(b, s, hq, d)
    Eo = fw["o"].reshape(b, s, hq, d)
    Mo = np.abs(o) + Eo
    vals, keys, q = st["values"][:, :, heads], st["keys"][:, :, heads], st["qr"]
    Ev, Ek, Eq = fw["values"], fw["keys"], fw["q"]
    Mv, Mk, Mq = np.abs(vals) + Ev, np.abs(keys) + Ek, np.abs(q) + Eq
    dO = back["dO"]
    EdO = (gamma(D, a) * (G @ np.abs(W["wo"])) + u * np.abs(dO.reshape(b, s, hq * d))).reshape(b, s, hq, d)
    MdO = np.abs(dO) + EdO
    tok = gamma(b * s, a)
    Gf = G.reshape(b * s, D).T
    EdWo = Gf @ Eo.reshape(b * s, hq * d) + tok * (Gf @ Mo.reshape(b * s, hq * d)) + u * np.abs(grads["wo"])
    EdV = (_group(np.einsum("bhij,bihe->bjhe", Ep, MdO) + np.einsum("bhij,bihe->bjhe", Mp, EdO), hq, hkv)
           + gamma(grp, a) * _group(np.einsum("bhij,bihe->bjhe", Mp, MdO), hq, hkv))[:, P:] + u * np.abs(back["dV"])
    dP, delta = back["dP"], back["delta"]
    ein = "bihe,bjhe->bhij"
    EdP = (np.einsum(ein, EdO, Mv) + np.einsum(ein, np.abs(dO), Ev) + gamma(d, a) * np.einsum(ein, np.abs(dO),
                                                                                              np.abs(vals))
           + u * np.abs(dP))
    EdP = np.where(vis, EdP, 0.0)
    rowdot = "bihe,bihe->bhi"
    EdA = (np.einsum(rowdot, EdO, Mo) + np.einsum(rowdot, np.abs(dO), Eo)
           + gamma(d, a) * np.einsum(rowdot, np.abs(dO), np.abs(o)))[..., None]
    MdP = np.abs(np.where(vis, dP, 0.0)) + EdP
    EdB = (np.sum(Ep * MdP + p * EdP, axis=-1, keepdims=True)
           + gamma(n, a) * np.sum(Mp * np.abs(np.where(vis, dP, 0.0)), axis=-1, keepdims=True))
    Edelta = np.maximum(EdA, EdB) + u * np.abs(delta)
    diff = np.where(vis, np.abs(dP - delta), 0.0)
    EdS = Mp * (EdP + Edelta) + Ep * diff + 3 * u * Mp * (diff + EdP + Edelta)
    EdS = np.where(vis, EdS, 0.0)
    scale = spec.scale
    EdZ = (EdS + 2 * u * (np.abs(back["dS"]) + EdS)) * scale
    AdZ = np.abs(back["dZ"])
    EdQ = (np.einsum("bhij,bjhe->bihe", EdZ, Mk) + np.einsum("bhij,bjhe->bihe", AdZ, Ek)
           + gn * np.einsum("bhij,bjhe->bihe", AdZ, np.abs(keys)) + u * np.abs(back["dQr"]))
    EdK = (_group(np.einsum("bhij,bihe->bjhe", EdZ, Mq) + np.einsum("bhij,bihe->bjhe", AdZ, Eq), hq, hkv)
           + gamma(grp, a) * _group(np.einsum("bhij,bihe->bjhe", AdZ, np.abs(q)), hq, hkv))[:, P:]
    EdK = EdK + u * np.abs(back["dKr"])
    if spec.encoding == "rope":
        EdQ = rope_budget(back["dQr"], EdQ, positions, spec, u, t, ang)
        EdK = rope_budget(back["dKr"], EdK, positions, spec, u, t, ang)
    flat = np.abs(X).reshape(b * s, D)
    out = {}
    Wabs = {n_: np.abs(w) for n_, w in W.items()}
    terms = {"wq": (EdQ, back["dQ"]), "wk": (EdK, back["dK"]), "wv": (EdV, back["dV"])}
    EX = np.zeros((b * s, D))
    MX = np.zeros((b * s, D))
    for name, (E, x) in terms.items():
        E2 = E.reshape(b * s, -1)
        M2 = np.abs(x).reshape(b * s, -1) + E2
        out[name] = E2.T @ flat + tok * (M2.T @ flat) + u * np.abs(grads[name])
        EX += E2 @ Wabs[name]
        MX += M2 @ Wabs[name]
    EX = EX + gamma(hq * d + 2 * hkv * d + 2, a) * MX
    out["hidden"] = EX.reshape(b, s, D) + u * np.abs(grads["hidden"])
    out["wo"] = EdWo
    out.update(bias_gradient_budget(st, spec, back["dS"], EdS, grads, dtype, profile))
    tiny = tolerance.SMALLEST_SUBNORMAL[dtype]
    return {r: e + tiny for r, e in out.items()}


def bias_gradient_budget(st: dict, spec, dS: np.ndarray, EdS: np.ndarray, grads: dict, dtype: str,
                         profile: str) -> dict:
    """{bias role: budget without the subnormal floor} of the T5 table's or FIRE's MLP's gradient
    from the bias's cotangent dS [b, hq, s, K] (exact) and its bound E_dS (gradient_budget).

    T5: rel_bias[t, h] = sum over the n_t visible (b, i, j) of bucket t of dS_bhij: E = sum E_dS +
    gamma_T(n_t) sum M_dS + u |grad| in the unit max(a, u): embedding's backward (index_add_ into a
    table of dtype T) accumulates in T itself, not in float32, and n_t counts every batch row.

    FIRE (the bias's forward in float32 in the usual module, cast to T): the gradient of theta is
    sum over the b rows of VJP_row(dS~_row), with dS~ the computed cotangent. The VJP is linear, so
    the error is VJP(dS~) - VJP(dS) (bounded by the VJP on magnitudes, reference.attention.backward
    .fire_magnitudes: every unit counted as active, |W1|, |W2|, c's two paths added, of E_dS) plus
    the arithmetic of the VJP applied to dS per row (conformance.core.bias_budgets.fire_gradients, its own
    derivation, with every entry graded: dS is 0 on the keys a query does not see, the count n_e
    is s K), plus the rows' sum (the b rows' gradients added, or the rows' dS added before one
    VJP): gamma(b) M_dS through the magnitude VJP. The arithmetic on the cotangent's error itself
    is first order in u E_dS: the magnitude term is scaled by 1 + gamma(hq + hidden + s K + b + 24)."""
    if spec.encoding not in ("t5", "fire"):
        return {}
    u = tolerance.unit_roundoff(dtype)
    t = tolerance.table_roundoff(dtype, profile)
    a = tolerance.accumulation_roundoff(dtype, profile)
    c = reference_config(spec)
    vis = st["vis"][:, None]
    EdS = np.where(vis, EdS, 0.0)
    MdS = np.abs(np.where(vis, dS, 0.0)) + EdS
    if spec.encoding == "t5":
        counts = ref_backward.t5_scatter(np.broadcast_to(vis, dS.shape).astype(np.float64), st, c)
        unit = max(a, u)
        scatter = ref_backward.t5_scatter
        return {"rel_bias": scatter(EdS, st, c) + gamma(counts, unit) * scatter(MdS, st, c)
                + u * np.abs(grads["rel_bias"])}
    b, hq, s, K = dS.shape
    w = st["W"]
    hidden = int(np.size(w["b1"]))
    pos, kpos = st["positions"], st["kpos"]
    params = bias_budgets.fire_weights(w)
    every = np.ones((s, K), dtype=bool)  # the entries not attended are 0 in the cotangent
    rows = [bias_budgets.fire_gradients(pos[bi], kpos[bi], params, np.where(vis[bi, 0][None], dS[bi], 0.0), every,
                                        INIT_L, EPS, dtype, profile) for bi in range(b)]
    spread = fire_cotangent_error(st, EdS + gamma(b, a) * MdS, t)
    lift = 1.0 + gamma(hq + hidden + s * K + b + 24, a)
    return {r: np.sum([row[r] for row in rows], axis=0) + lift * spread[r] for r in ref_backward.bias_roles(c)}


def fire_cotangent_error(st: dict, E: np.ndarray, t: float) -> dict:
    """{FIRE role: sum_bhij E_bhij |d b_bhij / d theta|}: how far an error E [b, hq, s, K] >= 0 in
    the bias's cotangent moves FIRE's gradients (the VJP is linear: |VJP(e)| <= sum |e| |db/dtheta|),
    with the exact derivatives db/dtheta of reference.fire.backward's formula: b2_h 1; W2_hk a_k;
    b1_k |W2_hk| [p_k > 0]; W1_k |W2_hk| [p_k > 0] x; c |sum_k W2_hk W1_k [p_k > 0]| |dx/dc|;
    L_multiplier the same with |dx/dL| init_L, counted in full on a tie i = L. A unit whose
    pre-activation lies within the forward's error of its kink (conformance.fire.backward's err_p,
    unit t) may be switched either way: it enters with |W2_hk W1_k| on top of the sum."""
    w = st["W"]
    W1, b1, W2 = w["W1"][:, 0], w["b1"], w["W2"]
    out = {n: 0.0 for n in ("c", "L_multiplier", "W1", "b1", "W2", "b2")}
    pos, kpos = st["positions"], st["kpos"]
    for bi in range(E.shape[0]):
        f = features(pos[bi], kpos[bi], {n: w[n] for n in out})
        x, D = f["x"], f["D"]
        err_x = t * (3 * (1 + x) / D + 6 * x)
        err_p = np.abs(W1) * err_x[..., None] + 2 * t * np.abs(W1) * x[..., None] + t * np.abs(b1)
        kink = np.abs(f["p"]) <= err_p  # [s, K, hidden]
        live = f["active"] | kink
        Em = np.moveaxis(E[bi], 0, -1)  # [s, K, hq]
        gate = np.abs(np.einsum("hk,ijk->ijh", W2 * W1, f["active"] & ~kink)) \
            + np.einsum("hk,ijk->ijh", np.abs(W2 * W1), kink)  # |sum_k W2_hk W1_k [p_k > 0]| [s, K, hq]
        Eg = np.sum(Em * gate, axis=-1)  # [s, K]
        out["c"] = out["c"] + np.sum(Eg * np.abs(f["dx_dc"]))
        dxdL = np.abs(f["dx_dL"]) / np.where(f["dm_dL"] > 0, f["dm_dL"], 1.0)  # a tie counted as 1
        out["L_multiplier"] = out["L_multiplier"] + np.sum(Eg * dxdL) * INIT_L
        S = Em @ np.abs(W2) * live  # [s, K, hidden]
        out["b1"] = out["b1"] + S.sum(axis=(0, 1))
        out["W1"] = out["W1"] + np.einsum("ijk,ij->k", S, x)[:, None]
        out["W2"] = out["W2"] + np.einsum("ijh,ijk->hk", Em, f["a"] + err_p * kink)
        out["b2"] = out["b2"] + Em.sum(axis=(0, 1))
    return {n: np.asarray(v, dtype=np.float64) for n, v in out.items()}
