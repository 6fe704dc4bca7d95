"""Error budget of ``attention.mla``: attention.forward's running bound (conformance/attention/
budgets.py, docs/tolerance.md "Attention", steps 2 to 5) on MLA's computation, evaluated on the
float64 reference's stages (reference.attention.mla.stages). The inputs q_nope, q_pe, k_nope,
k_pe and v are given in the dtype T under test (exact: no projection), and there is no output
projection, so steps 1 and 6 drop out.

Units as attention.forward's: u = u_T, t = table_roundoff(T, profile) (RoPE's cos and sin),
a = accumulation_roundoff(T, profile) (dot products, exp, the softmax's sum: float32 for float16
and bfloat16 inputs), g = angle_roundoff(profile); gamma(n) = n a / (1 - n a).

1. RoPE on q_pe and k_pe (pair a, b; YaRN's cos / sin factor f; position m; frequency theta):
       E_r = f (2 g |m| theta + 4 t + 5 u) (|x_a| + |x_b|)        (budgets.rope_budget, E_x = 0)
   q_nope and k_nope are exact (E = 0); k_pe's bound is broadcast to every head.
2. Logits z = (q_nope . k_nope + q_pe' . k_pe') c over the d_qk = d_nope + d_rope features,
   c = d_qk^-1/2 m^2:
       E_z = (E_q . M_k + M_q . E_k) c + (gamma(d_qk) + 4 u) |q| . |k| c
   (the concatenated dot product, or its two parts summed: gamma covers any order; c's rounding,
   its product and the stored logit 4 u: an implementation may fold m^2 into q, or scale q and k
   by sqrt(c) as SDPA does).
3. Softmax: attention.forward's step 4 (the exact perturbation bound |dp_j| <= p_j (e^(E_j + L)
   - 1), L = log sum_k p_k e^(E_k), with the arithmetic a |z_j - max| + gamma(n + 6) + u).
4. Output o = sum_j p_j v_j (v exact): E_o = sum_j E_p,j |v_j| + gamma(n) sum_j M_p,j |v_j| + u |o|.

Budget (float32, float64) = E_o + T's smallest subnormal. The reference's own error (NumPy float64
with the rope from reference.rope) is a few units of 2^-53 on the same magnitudes, far below every
term.

float16 and bfloat16: attention.forward's half-precision bound (conformance/attention/half.py: every
rounding to T propagated to first order with its exact sensitivity, combined by Hoeffding at
LAMBDA = 7, plus the softmax's second order), because the running bound above adds absolute values
at every stage and is 40 times wider than a correct layer's error there (bfloat16: zeros at 1.34
budgets, a missing m^2 passed half the catalog). MLA is put in that bound's terms exactly
(``as_attention``): per head the query [q_pe' | q_nope] and key [k_pe' | k_nope] (the rope features
first, as rotary_dim = d_rope; a dot product does not depend on the features' order), both times
m (so that 1/sqrt(d_qk) on them is c: every rounding bound and sensitivity moves together), zero
features padding q, k or v to d = max(d_qk, d_v), num_kv_heads = num_heads (the shared rope key
copied per head: one output element reads one head), no projection (X = 0, W_o = I). What that
bound adds beyond MLA's own roundings: the stored q, k, v before RoPE (u |x|: here they are exact
inputs) and W_o's accumulation (gamma(h d) |o|, in float32): a few per cent of the budget.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from conformance.attention.budgets import gamma, rope_budget, softmax_error
from conformance.attention.half import half_budget, is_half
from conformance.attention.spec import AttentionSpec
from conformance.core import tolerance


def rope_view(spec):
    """The spec's rope part as budgets.rope_budget reads a spec (rotary_dim = head_dim = d_rope)."""
    return SimpleNamespace(rotary_dim=spec.d_rope, head_dim=spec.d_rope, base=spec.base, scaling=spec.scaling,
                           seq_len=0, layout=spec.layout)


def forward_bounds(st: dict, spec, dtype: str, profile: str) -> dict:
    """The running bounds (module docstring): q, k [b, s, h, d_qk], z and p [b, h, s, s], out
    [b, s, h, d_v] (without the subnormal floor)."""
    u = tolerance.unit_roundoff(dtype)
    t = tolerance.table_roundoff(dtype, profile)
    a = tolerance.accumulation_roundoff(dtype, profile)
    g = tolerance.angle_roundoff(profile)
    pos = st["positions"]
    rv = rope_view(spec)
    b, s, h, dn = st["q_nope"].shape
    Eqr = rope_budget(st["q_pe"], np.zeros_like(st["q_pe"]), pos, rv, u, t, g)
    Ekr = rope_budget(st["k_pe"], np.zeros_like(st["k_pe"]), pos, rv, u, t, g)
    Eq = np.concatenate([np.zeros_like(st["q_nope"]), Eqr], axis=-1)
    Ek = np.concatenate([np.zeros_like(st["k_nope"]), np.broadcast_to(Ekr, Eqr.shape)], axis=-1)
    q, k = st["q"], st["k"]
    Mq, Mk = np.abs(q) + Eq, np.abs(k) + Ek
    c = abs(st["scale"])
    d = q.shape[-1]
    ein = "bihe,bjhe->bhij"
    Ez = (np.einsum(ein, Eq, Mk) + np.einsum(ein, Mq, Ek)) * c + (gamma(d, a) + 4 * u) * np.einsum(
        ein, np.abs(q), np.abs(k)) * c
    vis = st["vis"]
    p = st["p"]
    Ep = softmax_error(p, st["z"], vis, Ez, a, u)
    n = vis.sum(axis=-1)  # [s]
    absv = np.abs(st["v"])
    Eo = (np.einsum("bhij,bjhe->bihe", Ep, absv)
          + gamma(n, a)[None, :, None, None] * np.einsum("bhij,bjhe->bihe", p + Ep, absv)
          + u * np.abs(st["out"]))
    return {"q": Eq, "k": Ek, "z": np.where(vis, Ez, 0.0), "p": Ep, "out": Eo}


def as_attention(st: dict, spec):
    """(stages, AttentionSpec) of attention.forward that compute MLA's output head by head (module
    docstring): reference.attention.stages' keys from MLA's stages, d = max(d_qk, d_v)."""
    b, s, h, dn = st["q_nope"].shape
    r, dv = spec.d_rope, spec.d_v
    d = max(dn + r, dv)
    m = np.sqrt(st["scale"] * np.sqrt(d))  # (m q) . (m k) / sqrt(d) = c q . k

    def head(first, rest, width):
        x = np.concatenate([first, rest], axis=-1) * m
        return np.concatenate([x, np.zeros((*x.shape[:3], width - x.shape[-1]))], axis=-1)

    kp = np.broadcast_to(st["k_pe"], st["q_pe"].shape)
    kr = np.broadcast_to(st["kr"], st["q_pe"].shape)
    v = np.concatenate([st["v"], np.zeros((b, s, h, d - dv))], axis=-1)
    out = np.concatenate([st["out"], np.zeros((b, s, h, d - dv))], axis=-1).reshape(b, s, h * d)
    hd = h * d  # the model width: W_o = I maps the heads' outputs onto it
    view = dict(X=np.zeros((b, s, hd)), W={"wq": np.zeros((hd, hd)), "wk": np.zeros((hd, hd)),
                                           "wv": np.zeros((hd, hd)), "wo": np.eye(hd)},
                q=head(st["q_pe"], st["q_nope"], d), qr=head(st["qr"], st["q_nope"], d),
                k=head(kp, st["k_nope"], d), keys=head(kr, st["k_nope"], d), v=v, values=v, z=st["z"], p=st["p"],
                o=out, out=out, vis=np.broadcast_to(st["vis"], (b, s, s)), kpos=st["positions"])
    aspec = AttentionSpec(num_heads=h, num_kv_heads=h, head_dim=d, causal=spec.causal, encoding="rope",
                          base=spec.base, rotary_dim=r, layout=spec.layout, scaling=spec.scaling)
    return view, aspec


def forward_budget(st: dict, spec, dtype: str, profile: str) -> np.ndarray:
    """float64 [b, s, h, d_v]: the budget of every output element (half precision: half.py's
    bound on as_attention's view; otherwise the running bound)."""
    if is_half(dtype):
        view, aspec = as_attention(st, spec)
        b, s, h, _ = st["out"].shape
        return half_budget(view, aspec, st["positions"], dtype, profile).reshape(b, s, h, -1)[..., :spec.d_v]
    return forward_bounds(st, spec, dtype, profile)["out"] + tolerance.SMALLEST_SUBNORMAL[dtype]
