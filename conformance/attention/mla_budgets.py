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

Budget = E_o + T's smallest subnormal. The reference's own error (NumPy float64 with the rope from
reference.rope) is a few units of 2^-53 on the same magnitudes, far below every term.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from conformance.attention.budgets import gamma, rope_budget
from conformance.core import tolerance


def rope_view(spec):
    """The spec's rope part as budgets.rope_budget reads a spec (rotary_dim = head_dim = d_rope)."""
    return SimpleNamespace(rotary_dim=spec.d_rope, head_dim=spec.d_rope, base=spec.base, scaling=spec.scaling,
                           seq_len=0, layout=spec.layout)


def softmax_error(p, z, vis, Ez, a, u):
    """E_p [.., s, K]: attention.forward's step 4 (budgets.forward_bounds) on probabilities p,
    logits z (-inf where not visible), visibility vis and logit bounds Ez."""
    Ez = np.where(vis, Ez, 0.0)
    n = vis.sum(axis=-1, keepdims=True)
    with np.errstate(over="ignore"):
        L = np.log(np.maximum(np.sum(p * np.exp(np.minimum(Ez, 700.0)), axis=-1, keepdims=True), 1.0))
        prop = np.expm1(np.minimum(Ez + L, 700.0))
    top = np.max(np.where(vis, z, -np.inf), axis=-1, keepdims=True)
    spread = np.where(vis, np.abs(z - np.where(np.isfinite(top), top, 0.0)), 0.0)
    arith = a * spread + gamma(n + 6, a) + u
    return np.where(vis, p * ((1 + prop) * (1 + arith) - 1), 0.0)


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


def forward_budget(st: dict, spec, dtype: str, profile: str) -> np.ndarray:
    """float64 [b, s, h, d_v]: the budget of every output element."""
    return forward_bounds(st, spec, dtype, profile)["out"] + tolerance.SMALLEST_SUBNORMAL[dtype]
