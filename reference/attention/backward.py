"""The attention layer's backward pass in float64: the vector-Jacobian product (VJP) of
``reference.attention.forward`` with respect to hidden and the four weights.

Formula (the forward in __init__; standard softmax backward, e.g. Dao et al., FlashAttention,
arXiv 2205.14135, Appendix B.2). With g = dL/d out [b, s, D], per batch row, query head h (kv head
gr = h // (hq / hkv)), query i and visible key slot j (P[h, i, j] = 0 where not visible):

    dW_o = sum_tokens g^T o                      [D, hq d]     (o = concat_h o_h, the heads' outputs)
    dO   = g W_o                                  [s, hq d]
    dV_gr,j = sum_{h in gr} sum_i P_hij dO_hi     (new tokens' slots; the cache's values are inputs)
    dP_hij  = dO_hi . v_gr,j
    delta_hi = rowsum(dO_hi o o_hi) = sum_e dO_hie o_hie   (= sum_j P_hij dP_hij)
    dS_hij  = P_hij (dP_hij - delta_hi)          (softmax backward; the mask is a constant)
    dZ = dS / sqrt(d)                             (the logit scale, as in the forward)
    dQr_hi = sum_j dZ_hij k_gr,j;   dKr_gr,j = sum_{h in gr} sum_i dZ_hij q_hi
    dQ = f R_{-m} dQr, dK = f R_{-m} dKr          (RoPE's VJP: reference/rope/backward.py apply_vjp;
                                                  identity for "alibi" and "none")
    dX = dQ W_q + dK W_k + dV W_v;   dW_q = sum_tokens dQ^T X,  dW_k, dW_v likewise.

The bias's parameters (z = q.k / sqrt(d) + b, so dL/db_hij = dS_hij, before the scale), where
the weights dict holds them (``bias_roles``):
    T5:   grad rel_bias[t, h] = sum over the batch rows and the (i, j) whose bucket is t of dS_hij
          (a scatter-add; reference.t5's bucket of p_j - p_i as the forward reads it)
    FIRE: grad theta = sum over the batch rows of reference.fire.backward.bias_vjp(G = dS[b]) at
          that row's query and key positions (the VJP of the MLP bias; positions may differ per row)
ALiBi's slopes and KERPLE's r1, r2 are configuration (not tensors): they get no gradient.

Shapes: g float [b, s, D]; the result is {"hidden" [b, s, D], "wq" [hq d, D], "wk" [hkv d, D],
"wv" [hkv d, D], "wo" [D, hq d]} in float64, plus "rel_bias" [num_buckets, hq] for T5, and "c",
"L_multiplier" (0-d), "W1" [hidden, 1], "b1" [hidden], "W2" [hq, hidden], "b2" [hq] for FIRE. Rows
of the output that see no key are 0 in the forward whatever the inputs, so their cotangent
contributes nothing.

Modes.
- "fast": float64 on one of three backends (``backend``), each within ``fast_bound``: its error is
  BOUNDED, per element, by rho N + u |grad| + 2^-1074, N the same VJP evaluated on magnitudes
  (``magnitudes``: every factor by its absolute value, every subtraction as a sum), rho the
  relative factor ``error_factor`` derived from the chain's roundings (float64 units, the logit
  error's amplification through exp included). tests/attention/test_attention_backward.py checks
  the bound against the golden values on every backend.
- "golden": the whole chain (forward and backward) in mpmath at 192 bits from the float64 inputs,
  RoPE at -m through the golden rotation, each gradient element rounded once to the nearest
  double: FAITHFULLY rounded (every gradient element is a reduction), certified against the
  independent ``oracle.vjp_exact`` (explicit softmax Jacobian diag(p) - p p^T, complex conjugate
  rotations, mpmath matrices) in the tests. It does not depend on ``backend`` (any valid value).

Backends of the fast mode (``backend``, default "numpy"; checked by rope's check_backend).
- "numpy": plain float64 NumPy (einsum / matmul) on the forward's NumPy stages
  (``vjp_from_stages``), RoPE's VJP by ``reference.rope.backward.apply_vjp`` (backend numpy); the
  conformance runner's reference.
- "cpu" (Numba, cpu_kernels.py) and "cuda" (numba.cuda, cuda_kernels.py): the forward's kernel
  stages (core.kernel_stages: Dot2 projections, RoPE and the bias on the same backend), dO = g W_o,
  then per query row (softmax_backward: the weights p = e / total and o exactly as the forward's
  ``attend``, dP_j = dO_hi . v_gj, delta = dO_hi . o_hi, dS = p (dP - delta), dQr = sum_j dZ_j
  k_gj), per new token (key_value_backward: dKr, dV over the group's heads h, then the queries i),
  RoPE's VJP by apply_vjp on the same backend, dX = [dQ dK dV] [W_q; W_k; W_v] as one sum per
  element, dW_x = dx^T X and dW_o = g^T o; every contraction is Dot2 (cpu_kernels' docstring),
  each output owned by one thread in a fixed order (no atomics on the GPU). T5's table is a
  plain float64 scatter-add in the order (batch row, i, j), as the NumPy path's np.add.at; FIRE's
  MLP gradient is reference.fire.backward.bias_vjp on the same backend, per batch row, on the
  backend's dS (its orders are within fire_factor's gamma, any order). These two backends take
  |g| <= 2^400, as the forward takes its inputs (Dekker's splitting in Dot2 stays finite). Why
  ``fast_bound`` (derived for NumPy's sums) holds for them: an n-term Dot2 errs by at most u |x.y| + gamma(n)^2 sum |x_k
  y_k| <= (gamma(n) + u) N (Ogita, Rump, Oishi 2005; the bound in cpu_kernels' docstring;
  gamma(n) < 1), the factor ``error_factor`` charges every n-term product; the logits,
  exponentials and compensated denominator are the forward kernels' (within the forward's softmax
  bound e_p); o = (sum_j e_j v_j) / total divides once after the sum instead of once per weight,
  the same relative factors (e_p, gamma(n) + u); the single sum for dX has hq d + 2 hkv d terms,
  gamma(hq d + 2 hkv d + 2) + u in the bound; exact zero terms (keys a row does not see) leave a
  Dot2 sum unchanged (TwoProduct and TwoSum are exact on them); RoPE's VJP on cpu and cuda is
  within the same 4 pair-ulps as the NumPy twin (reference/rope/ACCURACY.md), under r_r's 9 u.
  Measured on the tests' cases: errors against golden of the NumPy path's order, under 10^-2 of
  the bound. The cpu and cuda results agree within a few u of the largest element (tests/attention/test_attention_cuda.py:
  the GPU may contract dot * scale + bias into one FMA and its exp is libdevice's; the simulator
  evaluates cuda.fma unfused, which turns Dot2 into a compensated sum of rounded products).

Never imports torch.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np

from reference.golden.certify import nearest_double
from reference.numerics import rotation
from reference.numerics.bias import fire
from reference.numerics.bias.fire import EPS, INIT_L
from reference.numerics.bias.fire_backward import bias_jvp, bias_vjp, features
from reference.numerics.bias.kerple import FAST_ULPS
from reference.numerics.frequencies import frequencies
from reference.numerics.layouts import pair_indices
from reference.numerics.rotation_backward import apply_vjp
from reference.numerics.validate import check_backend, check_mode

from .core import (
    BASE_WEIGHTS,
    FIRE_WEIGHTS,
    GOLDEN_PREC,
    MAX_ABS,
    T5_WEIGHTS,
    _golden_frequencies,
    _golden_rotate,
    check_config,
    check_inputs,
    golden_bias,
    kernel_stages,
    stages,
    t5_bias,
    t5_buckets,
)

ROLES = ("hidden", "wq", "wk", "wv", "wo")
U = 2.0**-53


def check_cotangent(g, shape) -> np.ndarray:
    """g: a finite real array shaped like the output [b, s, D]; float64 copy. ValueError naming g."""
    arr = np.asarray(g)
    if arr.dtype.kind not in "fiu" or arr.shape != tuple(shape):
        raise ValueError(f"g: must be a real array of the output's shape {list(shape)}, got {arr.dtype} "
                         f"{list(arr.shape)}")
    arr = np.array(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("g: must be finite")
    return arr


def _rope_vjp(x, positions, c, backend="numpy"):
    return apply_vjp(x, positions, rotary_dim=c.rot, base=c.base, layout=c.layout, scaling=c.scaling,
                     seq_len=c.seq_len or None, backend=backend)


def vjp_from_stages(st: dict, g: np.ndarray, config, *, logit_scale=None, rope_back=None, keep=None) -> dict:
    """The fast VJP from the forward's NumPy stages (module docstring). logit_scale replaces
    1/sqrt(d) in the backward only and rope_back(x, positions, config) replaces RoPE's VJP: both
    exist for the fault models of a diagnosis (the forward stays right). keep: a dict that receives
    the backward's intermediates dO [b, s, hq, d], dP, delta, dS, dZ [b, hq, s, K], dQr [b, s, hq,
    d], dKr, dV [b, s, hkv, d] (new tokens; before RoPE's VJP), dQ, dK (after it)."""
    c = config
    X, W, p = st["X"], st["W"], st["p"]
    b, s, D = X.shape
    hq, hkv, d = c.num_heads, c.num_kv_heads, c.head_dim
    K = st["keys"].shape[1]
    P = K - s
    heads = np.arange(hq) // c.group
    keys, vals = st["keys"][:, :, heads], st["values"][:, :, heads]  # [b, K, hq, d]
    o = st["o"]
    dWo = g.reshape(b * s, D).T @ o.reshape(b * s, hq * d)
    dO = (g @ W["wo"]).reshape(b, s, hq, d)
    dV = _group_sum(np.einsum("bhij,bihe->bjhe", p, dO), hkv)
    dP = np.einsum("bihe,bjhe->bhij", dO, vals)
    delta = np.einsum("bihe,bihe->bhi", dO, o.reshape(b, s, hq, d))[..., None]
    dS = p * (dP - delta)
    dZ = dS * (c.scale if logit_scale is None else logit_scale)
    dQ = np.einsum("bhij,bjhe->bihe", dZ, keys)
    dK = _group_sum(np.einsum("bhij,bihe->bjhe", dZ, st["qr"]), hkv)
    dK, dV = dK[:, P:], dV[:, P:]
    dQr, dKr = dQ, dK
    if c.encoding == "rope":
        pos = st["positions"]
        back = _rope_vjp if rope_back is None else rope_back
        dQ, dK = back(dQ, pos, c), back(dK, pos, c)
    if keep is not None:
        keep.update(dO=dO, dP=dP, delta=delta, dS=dS, dZ=dZ, dQr=dQr, dKr=dKr, dV=dV, dQ=dQ, dK=dK)
    out = _projections_back(X, W, dQ, dK, dV, dWo)
    out.update(bias_gradients(st, dS, c))
    return out


def bias_roles(config) -> tuple:
    """The weights dict's bias parameters that get a gradient: T5's table, FIRE's MLP, else ()."""
    return {"t5": T5_WEIGHTS, "fire": FIRE_WEIGHTS}.get(config.encoding, ())


def roles(config) -> tuple:
    """Every role vjp returns for this config: ROLES, then ``bias_roles``."""
    return ROLES + bias_roles(config)


def t5_scatter(values: np.ndarray, st: dict, c) -> np.ndarray:
    """[num_buckets, hq]: sum of values [b, hq, s, K] over the visible (b, i, j) of each bucket
    (np.add.at: one float64 rounding per term, in order)."""
    out = np.zeros((c.num_buckets, c.num_heads))
    vis = st["vis"]
    for bi in range(values.shape[0]):
        bk = t5_buckets(c, st["positions"][bi], st["kpos"][bi])  # [s, K]
        i, j = np.nonzero(vis[bi])
        np.add.at(out, bk[i, j], values[bi][:, i, j].T)
    return out


def bias_gradients(st: dict, dS: np.ndarray, c, backend: str = "numpy") -> dict:
    """{bias role: float64 gradient} from the bias's cotangent dS [b, hq, s, K] (module docstring);
    FIRE's VJP runs on ``backend``."""
    if c.encoding == "t5":
        return {"rel_bias": t5_scatter(dS, st, c)}
    if c.encoding != "fire":
        return {}
    w = {n: st["W"][n] for n in FIRE_WEIGHTS}
    pos, kpos = st["positions"], st["kpos"]
    rows = [bias_vjp(dS[bi], pos[bi], kpos[bi], w, backend=backend) for bi in range(dS.shape[0])]
    return {n: np.sum([r[n] for r in rows], axis=0) for n in FIRE_WEIGHTS}


def _group_sum(x, hkv):
    """[b, K, hq, d] -> [b, K, hkv, d]: sum over the query heads sharing a kv head (repeat_kv's VJP)."""
    b, K, hq, d = x.shape
    return x.reshape(b, K, hkv, hq // hkv, d).sum(axis=3)


def _projections_back(X, W, dQ, dK, dV, dWo) -> dict:
    b, s, D = X.shape
    flat = X.reshape(b * s, D)
    dq, dk, dv = (a.reshape(b * s, a.shape[2] * a.shape[3]) for a in (dQ, dK, dV))  # b s = 0 allowed
    dX = dq @ W["wq"] + dk @ W["wk"] + dv @ W["wv"]
    return {"hidden": dX.reshape(b, s, D), "wq": dq.T @ flat, "wk": dk.T @ flat, "wv": dv.T @ flat, "wo": dWo}


def _stages(hidden, weights, positions, config, attention_mask, past_keys, past_values):
    st = stages(hidden, weights, positions, config, attention_mask=attention_mask, past_keys=past_keys,
                past_values=past_values)
    st["positions"] = np.asarray(positions, dtype=np.int64)
    return st


def vjp(g, hidden, weights, positions, config, *, attention_mask=None, past_keys=None, past_values=None,
        backend="numpy", mode="fast") -> dict:
    """{role: float64 gradient} of <g, forward(...)> for roles hidden, wq, wk, wv, wo and the
    bias's parameters of ``bias_roles`` (module docstring). g [b, s, D]; the other arguments as
    reference.attention.forward. backend "numpy" (the default), "cpu" or "cuda" picks the fast
    mode's implementation; golden mode is mpmath whatever the backend."""
    backend, mode = check_backend(backend), check_mode(mode)
    if mode == "fast" and backend != "numpy":
        return _kernel_vjp(g, hidden, weights, positions, config, attention_mask, past_keys, past_values, backend)
    st = _stages(hidden, weights, positions, config, attention_mask, past_keys, past_values)
    cot = check_cotangent(g, st["out"].shape)
    if mode == "golden":
        return _golden(cot, st, check_config(config))
    return vjp_from_stages(st, cot, config)


# ---- fast mode on the Numba kernels (backends cpu and cuda) ------------------------------------


def _kernel_vjp(g, hidden, weights, positions, config, attention_mask, past_keys, past_values, backend) -> dict:
    """The fast VJP on backend "cpu" or "cuda" (module docstring, "Backends"): the forward's
    stages by its kernels (core.kernel_stages), dO = g W_o, the softmax backward and dQr per row,
    dKr and dV per new token, RoPE's VJP on the same backend, then the projections, every
    contraction by Dot2."""
    c = check_config(config)
    X, W, pos, mask, pk, pv = check_inputs(hidden, weights, positions, c, attention_mask, past_keys, past_values)
    cot = _kernel_cotangent(g, X.shape)
    st = kernel_stages(X, W, pos, mask, pk, pv, c, backend)
    kern = st["kernels"]
    b, s, D = X.shape
    hq, d = c.num_heads, c.head_dim
    scale = c.scale
    flat_g = cot.reshape(b * s, D)
    dO = kern.project(flat_g, W["wo"].T).reshape(b, s, hq, d)
    o, p, dS, dQ = kern.softmax_backward(st["qr"], st["keys"], st["values"], st["bias"], st["vis"], dO, scale,
                                         c.group)
    dK, dV = kern.key_value_backward(st["qr"], dO, p, dS, st["vis"], scale, c.group, pk.shape[2], c.num_kv_heads)
    if c.encoding == "rope":
        dQ, dK = _rope_vjp(dQ, pos, c, backend), _rope_vjp(dK, pos, c, backend)
    out = _kernel_projections_back(kern, X, W, dQ, dK, dV)
    out["wo"] = kern.project(flat_g.T, o.reshape(b * s, hq * d).T)
    out.update(_kernel_bias_gradients(kern, dS, dict(W=W, positions=pos, kpos=st["kpos"], vis=st["vis"]), c, backend))
    return out


def _kernel_cotangent(g, shape) -> np.ndarray:
    """``check_cotangent`` and |g| <= 2^400, the forward's limit on its inputs."""
    cot = check_cotangent(g, shape)
    if cot.size and np.max(np.abs(cot)) > MAX_ABS:
        raise ValueError("g: must have |g| <= 2**400 on the cpu and cuda backends (Dot2's splitting stays exact)")
    return cot


def _kernel_projections_back(kern, X, W, dQ, dK, dV) -> dict:
    """dX = [dQ dK dV] [W_q; W_k; W_v] (one Dot2 sum per element) and dW_x = dx^T X."""
    b, s, D = X.shape
    flat = X.reshape(b * s, D)
    dx = np.concatenate([a.reshape(b * s, a.shape[2] * a.shape[3]) for a in (dQ, dK, dV)], axis=1)
    dX = kern.project(dx, np.concatenate([W["wq"], W["wk"], W["wv"]]).T)
    dW = kern.project(dx.T, flat.T)
    nq, nk = W["wq"].shape[0], W["wk"].shape[0]
    return {"hidden": dX.reshape(b, s, D), "wq": dW[:nq], "wk": dW[nq:nq + nk], "wv": dW[nq + nk:]}


def _kernel_bias_gradients(kern, dS, st, c, backend) -> dict:
    """T5's table by the backend's scatter kernel; FIRE's MLP by its VJP on the same backend."""
    if c.encoding != "t5":
        return bias_gradients(st, dS, c, backend)
    buckets = np.stack([t5_buckets(c, st["positions"][bi], st["kpos"][bi]) for bi in range(dS.shape[0])])
    return {"rel_bias": kern.t5_scatter(dS, buckets.reshape(st["vis"].shape), st["vis"], c.num_buckets)}


def jvp_from_stages(st: dict, tangents: dict, config) -> np.ndarray:
    """J dx [b, s, D]: the forward's Jacobian-vector product for tangents {role: dx} (roles as
    ROLES; the cache, positions and mask held fixed), plain float64 from the stages:
    dq = dX W_q^T + X dW_q^T (k, v likewise), dqr = f R_m dq (RoPE is linear), dz = (dqr . k +
    q . dkr) / sqrt(d) + db, dp = p (dz - sum_j p dz), do = sum_j dp v + p dv, dout = do W_o^T + o
    dW_o^T, with db the bias's tangent when ``tangents`` holds the bias's parameters (T5: the
    tangent table read at each bucket; FIRE: reference.fire.backward.bias_jvp per batch row).
    Used by the adjoint identities <g, J dx> = <J^T g, dx> (identities.py)."""
    c = config
    X, W, p = st["X"], st["W"], st["p"]
    b, s, D = X.shape
    hq, hkv, d = c.num_heads, c.num_kv_heads, c.head_dim
    P = st["keys"].shape[1] - s
    heads = np.arange(hq) // c.group
    dX = tangents["hidden"]

    def dproj(name, h):
        return (dX @ W[name].T + X @ tangents[name].T).reshape(b, s, h, d)

    dq, dk, dv = dproj("wq", hq), dproj("wk", hkv), dproj("wv", hkv)
    if c.encoding == "rope":
        kw = dict(rotary_dim=c.rot, base=c.base, layout=c.layout, scaling=c.scaling, seq_len=c.seq_len or None,
                  backend="numpy")
        dq, dk = rotation.apply(dq, st["positions"], **kw), rotation.apply(dk, st["positions"], **kw)
    zeros = np.zeros((b, P, hkv, d))
    dkeys = np.concatenate([zeros, dk], axis=1)[:, :, heads]
    dvals = np.concatenate([zeros, dv], axis=1)[:, :, heads]
    keys, vals = st["keys"][:, :, heads], st["values"][:, :, heads]
    dz = (np.einsum("bihe,bjhe->bhij", dq, keys) + np.einsum("bihe,bjhe->bhij", st["qr"], dkeys)) * c.scale
    dz = np.where(st["vis"][:, None], dz + _bias_tangent(st, tangents, c), 0.0)
    dp = p * (dz - np.sum(p * dz, axis=-1, keepdims=True))
    do = (np.einsum("bhij,bjhe->bihe", dp, vals) + np.einsum("bhij,bjhe->bihe", p, dvals)).reshape(b, s, hq * d)
    return do @ W["wo"].T + st["o"] @ tangents["wo"].T


def _bias_tangent(st, tangents, c):
    """db [b, hq, s, K] for the bias's parameters' tangents (0 when tangents has none)."""
    names = bias_roles(c)
    if not names or not any(n in tangents for n in names):
        return 0.0
    if c.encoding == "t5":
        return np.stack([t5_bias(c, st["positions"][bi], st["kpos"][bi], tangents["rel_bias"])
                         for bi in range(st["positions"].shape[0])])
    w = {n: st["W"][n] for n in names}
    direction = {n: tangents.get(n, np.zeros(np.shape(w[n]))) for n in names}
    return np.stack([bias_jvp(direction, st["positions"][bi], st["kpos"][bi], w)
                     for bi in range(st["positions"].shape[0])])


# ---- the fast mode's error bound -------------------------------------------------------------


def _rope_magnitude(m, config):
    """f (|a| + |b|) on both members of every rotated pair (a bound on |R x| from |x| <= m)."""
    c = config
    f = frequencies(c.rot, c.base, c.scaling, c.seq_len or None)[1]
    first, second = pair_indices(c.rot, c.layout)
    out = m.copy()
    pair = f * (m[..., first] + m[..., second])
    out[..., first] = pair
    out[..., second] = pair
    return out


def magnitudes(st: dict, g: np.ndarray, config) -> dict:
    """{role: N} (every role of ``roles``) with N the VJP evaluated on magnitudes: |X|, |W|, the
    projections as |X| |W|^T, RoPE as f (|a| + |b|) per pair, the cache as |past|, the exact
    weights p >= 0, |g|, every difference (dP - delta) as a sum, T5's scatter of |dS| and FIRE's
    ``fire_magnitudes`` of it. Each gradient element's exact value, and every partial sum
    and product the backward forms on the way, is at most N in absolute value."""
    c = config
    X, W, p = np.abs(st["X"]), {n: np.abs(w) for n, w in st["W"].items()}, st["p"]
    b, s, D = X.shape
    hq, hkv, d = c.num_heads, c.num_kv_heads, c.head_dim
    P = st["keys"].shape[1] - s
    heads = np.arange(hq) // c.group
    mq = (X @ W["wq"].T).reshape(b, s, hq, d)
    mk = (X @ W["wk"].T).reshape(b, s, hkv, d)
    mv = (X @ W["wv"].T).reshape(b, s, hkv, d)
    if c.encoding == "rope":
        mq, mk = _rope_magnitude(mq, c), _rope_magnitude(mk, c)
    mkeys = np.concatenate([np.abs(st["keys"][:, :P]), mk], axis=1)[:, :, heads]
    mvals = np.concatenate([np.abs(st["values"][:, :P]), mv], axis=1)[:, :, heads]
    mo = np.einsum("bhij,bjhe->bihe", p, mvals)
    G = np.abs(g)
    dWo = G.reshape(b * s, D).T @ mo.reshape(b * s, hq * d)
    mdO = (G @ W["wo"]).reshape(b, s, hq, d)
    mdV = _group_sum(np.einsum("bhij,bihe->bjhe", p, mdO), hkv)
    mdP = np.einsum("bihe,bjhe->bhij", mdO, mvals)
    mdelta = np.einsum("bihe,bihe->bhi", mdO, mo)[..., None]
    mdS = p * (mdP + mdelta)
    mdZ = mdS * c.scale
    mdQ = np.einsum("bhij,bjhe->bihe", mdZ, mkeys)
    mdK = _group_sum(np.einsum("bhij,bihe->bjhe", mdZ, mq), hkv)[:, P:]
    mdV = mdV[:, P:]
    if c.encoding == "rope":
        mdQ, mdK = _rope_magnitude(mdQ, c), _rope_magnitude(mdK, c)
    out = _projections_back(X, W, mdQ, mdK, mdV, dWo)
    if c.encoding == "t5":
        out["rel_bias"] = t5_scatter(mdS, st, c)
    elif c.encoding == "fire":
        out.update(fire_magnitudes(st, mdS, c))
    return out


def gamma(n, a):
    na = float(n) * a
    return na / (1.0 - na)


def _chain(*rs):
    out = 1.0
    for r in rs:
        out *= 1.0 + r
    return out - 1.0


def forward_factors(st: dict, config, *, u: float, a: float, t: float, angle: float, bias_error=None) -> tuple:
    """(r_p, r_qk, r_r, e_p, r_o): the forward's relative factors of ``error_factor`` (projections,
    q and k, RoPE, the softmax weights, o = P v), derived there; shared with forward_bound.fast_bound."""
    c = config
    X = st["X"]
    D = X.shape[2]
    d = c.head_dim
    vis = st["vis"]
    n = int(max(1, vis.sum(axis=-1).max(initial=1)))
    chain = _chain
    r_p = gamma(D, a) + u
    r_r = 0.0
    if c.encoding == "rope":
        theta = frequencies(c.rot, c.base, c.scaling, c.seq_len or None)[0]
        mmax = float(np.max(np.abs(st["positions"]), initial=0))
        r_r = 2 * angle * mmax * float(np.max(theta)) + 4 * t + 5 * u
    r_qk = chain(r_p, r_r)
    mag = magnitude_logits(st, c)
    Ez = (2 * r_qk + r_qk * r_qk + gamma(d, a) + 4 * u) * mag
    if bias_error is not None:
        Ez = Ez + bias_error
    live = vis[:, None]
    Ezmax = float(np.max(np.where(live, Ez, 0.0), initial=0.0))
    z = st["z"]
    top = np.max(np.where(live, z, -np.inf), axis=-1, keepdims=True)
    spread = float(np.max(np.where(live & np.isfinite(top), np.abs(z - np.where(np.isfinite(top), top, 0.0)), 0.0),
                          initial=0.0))
    e_p = chain(math.expm1(min(2 * Ezmax, 700.0)), a * spread + gamma(n + 6, a) + u)
    r_o = chain(e_p, r_p, gamma(n, a) + u)
    return r_p, r_qk, r_r, e_p, r_o


def error_factor(st: dict, config, *, u: float, a: float, t: float, angle: float, bias_error=None) -> dict:
    """{role: rho}: |computed - exact| <= rho N (N from ``magnitudes``) for a backward computed with
    unit roundoff u on every stored intermediate, a on accumulations / exp / softmax, t on the RoPE
    tables, angle on the RoPE angle; inputs exact. Derivation (Higham, 2nd ed., eq. 3.5: an n-term
    dot product errs by gamma(n) = n a / (1 - n a) times its absolute version; errors compose as
    products (1 + r1)(1 + r2) - 1 along the chain):

    projections r_p = gamma(D) + u; RoPE r_r = 2 angle max|m| theta_max + 4 t + 5 u (the forward's
    per-pair bound relative to f (|a| + |b|)); q, k: r_qk = (1 + r_p)(1 + r_r) - 1.
    Logits: absolute error E_z <= (2 r_qk + r_qk^2 + gamma(d) + 4 u) |q| . |k| / sqrt(d) + E_b
    (bias_error: the bias's absolute error in the logits (ALiBi, KERPLE, FIRE, T5; _bias_error), or 0);
    the softmax weights then err relatively
    by e_p = (1 + expm1(2 max E_z))(1 + a max|z - max z| + gamma(n + 6) + u) - 1 (the forward's
    softmax bound, docs/tolerance.md "Attention", with L <= max E_z).
    Forward: o = P v: r_o = (1 + e_p)(1 + r_p)(1 + gamma(n) + u) - 1.
    Backward: dO = g W_o: r_dO = gamma(D) + u; dW_o: (1 + r_o)(1 + gamma(b s) + u) - 1;
    dV: (1 + e_p)(1 + r_dO)(1 + gamma(s hq/hkv) + u) - 1; dP: (1 + r_dO)(1 + r_p)(1 + gamma(d) + u) - 1;
    delta as rowsum(dO o) or sum_j P dP (either): the larger of (1 + r_dO)(1 + r_o)(1 + gamma(d) + u)
    and (1 + e_p)(1 + r_dP)(1 + gamma(n) + u), minus 1; dS = P (dP - delta) scaled by 1/sqrt(d):
    (1 + e_p)(1 + max(r_dP, r_delta))(1 + 5 u) - 1 (difference, product, scale and its product,
    storage); dQ: (1 + r_dZ)(1 + r_qk)(1 + gamma(n) + u)(1 + r_r) - 1, dK with gamma(s hq/hkv)
    in place of gamma(n); dX = dQ W_q + dK W_k + dV W_v:
    (1 + max(r_dQ, r_dK, r_dV))(1 + gamma(hq d + 2 hkv d + 2) + u) - 1; dW_x = dx^T X:
    (1 + r_dx)(1 + gamma(b s) + u) - 1.
    The bias's parameters, from dS (whose factor r_dZ covers: 5 u >= the difference, product and
    store): T5's table, a scatter-add of at most b s K terms per bucket, (1 + r_dZ)(1 + gamma(b s K)
    + u) - 1; FIRE's MLP (1 + r_dZ)(1 + fire_factor) - 1, against N from ``fire_magnitudes``.
    Each factor multiplies the magnitude of the term it perturbs, and every term of the backward
    is bounded by N, so rho N bounds the whole error to the order written (products of the
    factors included)."""
    c = config
    X = st["X"]
    b, s, D = X.shape
    hq, hkv, d = c.num_heads, c.num_kv_heads, c.head_dim
    vis = st["vis"]
    n = int(max(1, vis.sum(axis=-1).max(initial=1)))
    grp = s * (hq // hkv)
    chain = _chain
    r_p, r_qk, r_r, e_p, r_o = forward_factors(st, c, u=u, a=a, t=t, angle=angle, bias_error=bias_error)
    r_dO = gamma(D, a) + u
    r_dP = chain(r_dO, r_p, gamma(d, a) + u)
    r_delta = max(chain(r_dO, r_o, gamma(d, a) + u), chain(e_p, r_dP, gamma(n, a) + u))
    r_dZ = chain(e_p, max(r_dP, r_delta), 5 * u)
    r_dQ = chain(r_dZ, r_qk, gamma(n, a) + u, r_r)
    r_dK = chain(r_dZ, r_qk, gamma(grp, a) + u, r_r)
    r_dV = chain(e_p, r_dO, gamma(grp, a) + u)
    tokens = gamma(b * s, a) + u
    bias = {}
    if c.encoding == "t5":  # each bucket sums at most b s K terms dS (r_dZ covers dS: 5 u >= 3 u)
        bias["rel_bias"] = chain(r_dZ, gamma(b * s * st["vis"].shape[-1], a) + u)
    elif c.encoding == "fire":
        bias.update(dict.fromkeys(bias_roles(c), chain(r_dZ, fire_factor(st, c, a, u))))
    return bias | {"hidden": chain(max(r_dQ, r_dK, r_dV), gamma(hq * d + 2 * hkv * d + 2, a) + u),
            "wq": chain(r_dQ, tokens), "wk": chain(r_dK, tokens), "wv": chain(r_dV, tokens),
            "wo": chain(r_o, tokens)}


def _fire_rows(st, c):
    """[(float64 weights, reference.fire.backward.features)] per batch row."""
    w = {n: st["W"][n] for n in FIRE_WEIGHTS}
    return w, [features(st["positions"][bi], st["kpos"][bi], w) for bi in range(st["positions"].shape[0])]


def fire_magnitudes(st: dict, G: np.ndarray, c) -> dict:
    """{FIRE role: N}: FIRE's VJP on magnitudes for a cotangent magnitude G [b, hq, s, K] >= 0:
    every hidden unit counted as active (so a ReLU mask decided either way is covered), |W1|, |W2|,
    a_k <= |W1_k| x + |b1_k| (x >= 0), and x's two derivative paths in c added, |t1| + |t2|."""
    w, rows = _fire_rows(st, c)
    W1, W2, b1 = np.abs(w["W1"][:, 0]), np.abs(w["W2"]), np.abs(w["b1"])
    out = {n: 0.0 for n in ("c", "L_multiplier", "W1", "b1", "W2", "b2")}
    for bi, f in enumerate(rows):
        Gm = np.moveaxis(G[bi], 0, -1)  # [s, K, hq]
        S = Gm @ W2  # [s, K, hidden]
        Sx = S @ W1
        x = f["x"]
        ac, n, m, A, D = abs(float(w["c"])), f["n"], f["m"], f["A"], f["D"]
        t1, t2 = n / ((ac * n + 1) * D), A * m / ((ac * m + 1) * D * D)
        tL = A * ac / ((ac * m + 1) * D * D) * (f["dm_dL"] > 0)
        out["c"] = out["c"] + np.sum(Sx * (t1 + t2))
        out["L_multiplier"] = out["L_multiplier"] + np.sum(Sx * tL) * INIT_L * abs(float(np.sign(w["L_multiplier"])))
        out["W1"] = out["W1"] + np.einsum("ijk,ij->k", S, x)[:, None]
        out["b1"] = out["b1"] + S.sum(axis=(0, 1))
        out["W2"] = out["W2"] + np.einsum("ijh,ijk->hk", Gm, W1 * x[..., None] + b1)
        out["b2"] = out["b2"] + Gm.sum(axis=(0, 1))
    return {n: np.asarray(v, dtype=np.float64) for n, v in out.items()}


def fire_factor(st: dict, c, a: float, u: float) -> float:
    """rho of FIRE's fast VJP (reference.fire.backward.bias_vjp, float64, per batch row, rows
    summed) relative to ``fire_magnitudes``: along any path a term meets the head sum G W2 (hq
    terms), the hidden sum delta W1 (hidden terms), the sums over a row's s K entries and over the b
    rows, and at most 24 roundings in the features (log1p and its argument for A and D, eps, x = A
    / D: 8 u on x; t1 8 u; t2 and t_L 16 u; their difference and products): gamma(hq + hidden +
    s K + b + 24) + u. Where a pre-activation lies within 16 u (|W1_k| x + |b1_k|) of 0 the
    computed ReLU mask may differ from the exact one; there the unit's whole term (counted in N)
    may be missing or extra: rho = 1 (random draws essentially never meet this)."""
    w, rows = _fire_rows(st, c)
    b, hq, s, K = st["p"].shape
    hidden = int(np.size(w["b1"]))
    for f in rows:
        near = np.abs(f["p"]) <= 16 * u * (np.abs(w["W1"][:, 0]) * f["x"][..., None] + np.abs(w["b1"]))
        if np.any(near):
            return 1.0
    return gamma(hq + hidden + s * K + b + 24, a) + u


def magnitude_logits(st: dict, config) -> np.ndarray:
    """[b, hq, s, K]: |q| . |k| / sqrt(d) with |q|, |k| bounded as in ``magnitudes``."""
    c = config
    X, W = np.abs(st["X"]), {n: np.abs(w) for n, w in st["W"].items()}
    b, s, _ = X.shape
    hq, hkv, d = c.num_heads, c.num_kv_heads, c.head_dim
    P = st["keys"].shape[1] - s
    mq = (X @ W["wq"].T).reshape(b, s, hq, d)
    mk = (X @ W["wk"].T).reshape(b, s, hkv, d)
    if c.encoding == "rope":
        mq, mk = _rope_magnitude(mq, c), _rope_magnitude(mk, c)
    mkeys = np.concatenate([np.abs(st["keys"][:, :P]), mk], axis=1)[:, :, np.arange(hq) // c.group]
    return np.einsum("bihe,bjhe->bhij", mq, mkeys) * c.scale


def fast_bound(g, hidden, weights, positions, config, *, attention_mask=None, past_keys=None,
               past_values=None) -> dict:
    """{role: float64 array} (every role of ``roles``, the bias's parameters included): the bound
    on |vjp(mode="fast") - exact| per element: rho N + u |grad|
    + 2^-1074, rho = error_factor in float64 units (u = a = t = 2^-53; RoPE's NumPy twin reduces
    its angles exactly, so angle = 2^-53 covers its rounding of m theta)."""
    st = _stages(hidden, weights, positions, config, attention_mask, past_keys, past_values)
    c = check_config(config)
    cot = check_cotangent(g, st["out"].shape)
    N = magnitudes(st, cot, c)
    rho = error_factor(st, c, u=U, a=U, t=U, angle=U, bias_error=_bias_error(st, c, U))
    grads = vjp_from_stages(st, cot, c)
    return {r: rho[r] * N[r] + U * np.abs(grads[r]) + 2.0**-1074 for r in roles(c)}


def _bias_error(st, c, u):
    """The float64 bias's absolute error in the logits (None without a bias), plus the rounding
    of its sum with the scaled dot product (u |z|): ALiBi computes -m (p_i - p_j) with one product
    rounding (u |b|), the subtraction of integers being exact; KERPLE's fast mode is within
    reference.kerple.FAST_ULPS ulps (2 FAST_ULPS u |b|); FIRE's within reference.fire.fast_bound;
    T5's table lookup is exact."""
    if c.encoding not in ("alibi", "kerple", "fire", "t5"):
        return None
    bias = np.abs(st["bias"])
    if c.encoding == "alibi":
        own = u * bias
    elif c.encoding == "kerple":
        own = 2 * FAST_ULPS * u * bias
    elif c.encoding == "fire":
        w = {n: st["W"][n] for n in fire.ROLES}
        kpos, pos = st["kpos"], st["positions"]
        own = np.stack([fire.fast_bound(pos[i], kpos[i], w) for i in range(pos.shape[0])])
    else:
        own = np.zeros_like(bias)
    return own + u * np.where(st["vis"][:, None], np.abs(st["z"]), 0.0)


# ---- golden mode: forward and backward in mpmath, rounded once --------------------------------


def _golden(g, st, c) -> dict:
    X, W = st["X"], st["W"]
    b, s, D = X.shape
    hq, hkv, d = c.num_heads, c.num_kv_heads, c.head_dim
    K = st["keys"].shape[1]
    P = K - s
    vis, pos, kpos = st["vis"], st["positions"], st["kpos"]
    grp = c.group
    with mpmath.workprec(GOLDEN_PREC):
        mpf = mpmath.mpf
        zero = mpf(0)

        def mat(a):
            return np.vectorize(lambda x: mpf(float(x)), otypes=[object])(np.asarray(a, dtype=np.float64))

        Wm = {n: mat(W[n]) for n in BASE_WEIGHTS}
        theta, factor = _golden_frequencies(c) if c.encoding == "rope" else (None, None)
        scale = c.exact_scale()
        every = roles(c)
        acc = {r: np.full(np.shape(X) if r == "hidden" else np.shape(W[r]), zero, dtype=object) for r in every}
        for bi in range(b):
            bias = golden_bias(c, W, pos[bi], kpos[bi])
            buckets = t5_buckets(c, pos[bi], kpos[bi]) if c.encoding == "t5" else None
            dSb = np.full((hq, s, K), zero, dtype=object)  # the bias's cotangent (dS before the scale)
            Xb = mat(X[bi])  # [s, D]
            gb = mat(g[bi])
            q = (Xb @ Wm["wq"].T).reshape(s, hq, d)
            k = (Xb @ Wm["wk"].T).reshape(s, hkv, d)
            v = (Xb @ Wm["wv"].T).reshape(s, hkv, d)
            if c.encoding == "rope":
                q = np.array([[_golden_rotate(list(q[i, h]), int(pos[bi, i]), theta, factor, c) for h in range(hq)]
                              for i in range(s)], dtype=object)
                k = np.array([[_golden_rotate(list(k[i, h]), int(pos[bi, i]), theta, factor, c) for h in range(hkv)]
                              for i in range(s)], dtype=object).reshape(s, hkv, d)
            keys = np.concatenate([mat(st["keys"][bi, :P]).reshape(P, hkv, d), k], axis=0)
            vals = np.concatenate([mat(st["values"][bi, :P]).reshape(P, hkv, d), v], axis=0)
            dO = (gb @ Wm["wo"]).reshape(s, hq, d)
            o = np.full((s, hq, d), zero, dtype=object)
            dQ = np.full((s, hq, d), zero, dtype=object)
            dKs = np.full((K, hkv, d), zero, dtype=object)
            dVs = np.full((K, hkv, d), zero, dtype=object)
            for i in range(s):
                js = [j for j in range(K) if vis[bi, i, j]]
                if not js:
                    continue
                for h in range(hq):
                    gr = h // grp
                    z = []
                    for j in js:
                        zj = mpmath.fdot(q[i, h], keys[j, gr]) * scale
                        if bias is not None:
                            zj += bias[h, i, j]
                        z.append(zj)
                    top = max(z)
                    e = [mpmath.exp(zj - top) for zj in z]
                    total = mpmath.fsum(e)
                    pj = [x / total for x in e]
                    o[i, h] = [mpmath.fdot(pj, [vals[j, gr, x] for j in js]) for x in range(d)]
                    dP = [mpmath.fdot(dO[i, h], vals[j, gr]) for j in js]
                    delta = mpmath.fdot(dO[i, h], o[i, h])
                    dS = [pj[t] * (dP[t] - delta) for t in range(len(js))]
                    dZ = [x * scale for x in dS]
                    for t, j in enumerate(js):
                        dSb[h, i, j] = dS[t]
                    dQ[i, h] = [mpmath.fdot(dZ, [keys[j, gr, x] for j in js]) for x in range(d)]
                    for t, j in enumerate(js):
                        dKs[j, gr] = dKs[j, gr] + dZ[t] * q[i, h]
                        dVs[j, gr] = dVs[j, gr] + pj[t] * dO[i, h]
            dK, dV = dKs[P:], dVs[P:]
            if c.encoding == "rope":
                dQ = np.array([[_golden_rotate(list(dQ[i, h]), -int(pos[bi, i]), theta, factor, c)
                                for h in range(hq)] for i in range(s)], dtype=object)
                dK = np.array([[_golden_rotate(list(dK[i, h]), -int(pos[bi, i]), theta, factor, c)
                                for h in range(hkv)] for i in range(s)], dtype=object).reshape(s, hkv, d)
            dq, dk, dv = dQ.reshape(s, hq * d), dK.reshape(s, hkv * d), dV.reshape(s, hkv * d)
            acc["hidden"][bi] = dq @ Wm["wq"] + dk @ Wm["wk"] + dv @ Wm["wv"]
            acc["wq"] = acc["wq"] + dq.T @ Xb
            acc["wk"] = acc["wk"] + dk.T @ Xb
            acc["wv"] = acc["wv"] + dv.T @ Xb
            acc["wo"] = acc["wo"] + gb.T @ o.reshape(s, hq * d)
            if c.encoding == "t5":  # centered on the row's first visible key, as _golden_fire_vjp
                for h, i in np.ndindex(hq, s):
                    js = [j for j in range(K) if vis[bi, i, j]]
                    for j in js[1:]:
                        if buckets[i, j] != buckets[i, js[0]]:
                            acc["rel_bias"][buckets[i, j], h] += dSb[h, i, j]
                            acc["rel_bias"][buckets[i, js[0]], h] -= dSb[h, i, j]
            elif c.encoding == "fire":
                for n, v in _golden_fire_vjp(dSb, vis[bi], pos[bi], kpos[bi], W).items():
                    acc[n] = acc[n] + v
        return {r: np.asarray(np.vectorize(nearest_double, otypes=[np.float64])(acc[r]), dtype=np.float64)
                for r in every}


def _golden_fire_vjp(G, vis, q_positions, k_positions, W) -> dict:
    """{FIRE role: object array of mpf}: one batch row's VJP of FIRE's bias at the caller's
    precision for the exact cotangent G [hq, s, K] (dS, 0 where vis [s, K] is False). Per entry
    and head h the bias's derivative beta_h(i, j) in each parameter is reference.fire.backward's
    (W2_hk: a_k; b1_k: W2_hk [p_k > 0]; W1_k: W2_hk [p_k > 0] x; c: sum_k W2_hk W1_k [p_k > 0]
    dx/dc; L_multiplier: the same with dx/dL; b2_h: 1), the ReLU mask and the tie i = L decided
    exactly (torch's conventions relu'(0) = 0, abs'(0) = 0, dm/dL = 1/2 at a tie). Each row sums to
    zero (sum_j dS_hij = 0: the softmax ignores a constant added to a row), so the row's sum is
    taken as sum_j G_hij (beta_h(i, j) - beta_h(i, j0)), j0 its first visible key: equal in exact
    arithmetic, and exactly 0 where beta is constant along the row (b2 always; b1_k where unit k's
    mask does not change along it), so those gradients are exact zeros, not rounding residue."""
    mpf = mpmath.mpf
    heads, hidden = np.shape(W["W2"])
    c, lm = mpf(float(W["c"])), mpf(float(W["L_multiplier"]))
    ac, L, eps, sc = abs(c), abs(lm * INIT_L), mpf(EPS), mpmath.sign(c)
    w1 = [mpf(float(v)) for v in np.ravel(W["W1"])]
    b1 = [mpf(float(v)) for v in W["b1"]]
    w2 = [[mpf(float(v)) for v in row] for row in W["W2"]]
    zero = mpf(0)
    acc = {"c": np.array(zero, dtype=object), "L_multiplier": np.array(zero, dtype=object),
           "W1": np.full((hidden, 1), zero, dtype=object), "b1": np.full(hidden, zero, dtype=object),
           "W2": np.full((heads, hidden), zero, dtype=object), "b2": np.full(heads, zero, dtype=object)}
    kp = [int(v) for v in k_positions]
    for a_, i in enumerate(int(v) for v in q_positions):
        js = [j for j in range(len(kp)) if vis[a_, j]]
        if len(js) < 2:
            continue
        m = max(mpf(i), L)
        dm_dL = 1 if L > i else (mpf(1) / 2 if L == i else 0)
        D = mpmath.log1p(ac * m) + eps

        def entry(j):
            n = mpf(abs(i - kp[j]))
            A = mpmath.log1p(ac * n)
            x = A / D
            pre = [w1[k] * x + b1[k] for k in range(hidden)]
            on = [p > 0 for p in pre]
            dx_dc = sc * (n / ((ac * n + 1) * D) - A * m / ((ac * m + 1) * D * D))
            dx_dL = -A * ac / ((ac * m + 1) * D * D) * dm_dL
            return x, [p if o else zero for p, o in zip(pre, on)], on, dx_dc, dx_dL

        first = entry(js[0])
        for j in js[1:]:
            now = entry(j)
            for h in range(heads):
                g = G[h, a_, j]
                if not g:
                    continue

                def beta(e):
                    x, act, on, dx_dc, dx_dL = e
                    gate = [w2[h][k] if on[k] else zero for k in range(hidden)]
                    gx = mpmath.fdot(gate, w1)
                    return act, gate, [v * x for v in gate], gx * dx_dc, gx * dx_dL

                new, old = beta(now), beta(first)
                for k in range(hidden):
                    acc["W2"][h, k] += g * (new[0][k] - old[0][k])
                    acc["b1"][k] += g * (new[1][k] - old[1][k])
                    acc["W1"][k, 0] += g * (new[2][k] - old[2][k])
                acc["c"] = np.array(acc["c"][()] + g * (new[3] - old[3]), dtype=object)
                acc["L_multiplier"] = np.array(acc["L_multiplier"][()] + g * (new[4] - old[4]), dtype=object)
    acc["L_multiplier"] = np.array(acc["L_multiplier"][()] * mpmath.sign(lm) * INIT_L, dtype=object)
    return acc


__all__ = ["ROLES", "bias_gradients", "bias_roles", "error_factor", "fast_bound", "jvp_from_stages", "magnitudes",
           "roles", "t5_scatter", "vjp", "vjp_from_stages"]
