"""Attention identities, evaluated on the fast float64 reference (backend cpu)."""

from __future__ import annotations

import numpy as np

from reference.attention import Config, backward, forward, stages
from reference.attention.backward import _stages, roles
from reference.identities import register

U = 2.0**-53


def _inputs(seed, b=2, s=6, dm=16, hq=4, hkv=2, d=4):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (b, s, dm))
    W = {"wq": rng.uniform(-0.5, 0.5, (hq * d, dm)), "wk": rng.uniform(-0.5, 0.5, (hkv * d, dm)),
         "wv": rng.uniform(-0.5, 0.5, (hkv * d, dm)), "wo": rng.uniform(-0.5, 0.5, (dm, hq * d))}
    return X, W, np.tile(np.arange(s, dtype=np.int64), (b, 1))


@register(id="attention.softmax-rows-sum-to-one", bound=64 * U,
          statement="the attention weights of every visible row sum to 1 (causal, padded, RoPE; 2 x 4 x 6 rows)")
def rows_sum() -> float:
    """Residual: max |sum_j p_ij - 1| over rows with a visible key, the weights as the NumPy
    stages compute them (e_j / sum e). Bound 64u: each p_j carries the division's rounding (u
    relative) and the sum's n u; n = 6 keys, so (n + 1) u per row suffices, 64 u leaves room."""
    X, W, pos = _inputs(1)
    mask = np.ones((2, 6), dtype=bool)
    mask[1, :2] = False
    st = stages(X, W, pos, Config(4, 2, 4, True, "rope"), attention_mask=mask)
    sums = st["p"].sum(axis=-1)
    live = st["vis"].any(axis=-1)[:, None, :].repeat(4, axis=1)
    return float(np.max(np.abs(np.where(live, sums - 1.0, 0.0))))


@register(id="attention.permutation-equivariance", bound=64 * U,
          statement="non-causal NoPE attention commutes with permuting the tokens (2 rows of 6 tokens)")
def permutation() -> float:
    """Residual: max |f(X[pi]) - f(X)[pi]| / max |f(X)|. Without positions or a causal mask every
    query sees the same set of keys in another order; Dot2 and the compensated sums make each
    output within a few u of the exact value whatever the order (a few u relative to the largest
    output), so 64 u bounds the difference."""
    X, W, pos = _inputs(2)
    c = Config(4, 2, 4, False, "none")
    perm = np.array([3, 0, 5, 1, 4, 2])
    a = forward(X, W, pos, c)[:, perm]
    b = forward(X[:, perm], W, pos, c)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(a)))


@register(id="attention.rope-relative-positions", bound=2.0**-40,
          statement="causal RoPE attention is unchanged when every position shifts by the same amount "
          "(shift 1000, 6 tokens)")
def relative() -> float:
    """Residual: max |f(p + 1000) - f(p)| / max |f(p)|. q_i . k_j after RoPE depends on p_i - p_j
    only (R_m^T R_n = R_(n-m)); the reference rotates with exactly reduced angles, each rotated
    element within 4 ulps of its pair's norm, so logits differ by about 8 u (|q| |k|), weights
    and outputs relatively by a few times that: 2^-40 leaves a wide margin over u = 2^-53."""
    X, W, pos = _inputs(3)
    c = Config(4, 2, 4, True, "rope")
    a, b = forward(X, W, pos, c), forward(X, W, pos + 1000, c)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(a)))


@register(id="attention.alibi-shift-invariance", bound=2.0**-40,
          statement="causal ALiBi attention is unchanged when every position shifts by the same amount "
          "(shift 64, 6 tokens)")
def alibi_shift() -> float:
    """Residual: max |f(p + 64) - f(p)| / max |f(p)|: the bias -m (p_i - p_j) sees differences
    only, and integer differences below 2^53 are exact, so both runs compute the same bias bit for
    bit and the residual is 0; the bound 2^-40 only leaves room for a future change of kernel."""
    X, W, pos = _inputs(4)
    c = Config(4, 2, 4, True, "alibi")
    a, b = forward(X, W, pos, c), forward(X, W, pos + 64, c)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(a)))


@register(id="attention.relative-bias-shift-invariance", bound=2.0**-40,
          statement="causal attention with a KERPLE (log, power) or T5 bias is unchanged when every position "
          "shifts by the same amount (shift 100, 6 tokens)")
def relative_bias_shift() -> float:
    """Residual: the largest max |f(p + 100) - f(p)| / max |f(p)| over KERPLE log, KERPLE power and
    T5 (32 buckets, max distance 128). Both biases read |p_i - p_j| or p_j - p_i only, integer
    differences below 2^53 are exact, so both runs compute the same bias bit for bit and the
    residual is 0 (FIRE is not shift-invariant: its normalizer reads p_i); 2^-40 leaves room for a
    future change of kernel."""
    X, W, pos = _inputs(6)
    rng = np.random.default_rng(16)
    worst = 0.0
    for c, extra in ((Config(4, 2, 4, True, "kerple", kerple_variant="log", kerple_r1=(1.0, 0.5, 2.0, 0.25),
                             kerple_r2=(0.5, 1.0, 0.25, 3.0)), {}),
                     (Config(4, 2, 4, True, "kerple", kerple_variant="power", kerple_r1=(1.0, 0.5, 2.0, 0.25),
                             kerple_r2=(0.5, 1.5, 2.0, 0.75)), {}),
                     (Config(4, 2, 4, True, "t5"), {"rel_bias": rng.uniform(-2, 2, (32, 4))})):
        a, b = forward(X, {**W, **extra}, pos, c), forward(X, {**W, **extra}, pos + 100, c)
        worst = max(worst, float(np.max(np.abs(a - b)) / np.max(np.abs(a))))
    return worst


@register(id="attention.gqa-is-repeated-mha", bound=0.0,
          statement="grouped-query attention equals multi-head attention with each kv head's weights repeated "
          "for its group (4 query heads over 2 kv heads)")
def gqa_repeat() -> float:
    """Residual: max |GQA(W_k, W_v) - MHA(repeat(W_k), repeat(W_v))|. Query head h reads kv head
    h // 2 in both (HF repeat_kv); the repeated rows give bit-identical projections, rotations and
    dot products in the same order, so the residual is exactly 0."""
    X, W, pos = _inputs(5)
    gqa = forward(X, W, pos, Config(4, 2, 4, True, "rope"))
    rep = {n: (w.reshape(2, 4, -1).repeat(2, axis=0).reshape(16, -1) if n in ("wk", "wv") else w)
           for n, w in W.items()}
    mha = forward(X, rep, pos, Config(4, 4, 4, True, "rope"))
    return float(np.max(np.abs(gqa - mha)))


def _adjoint_case(seed):
    """A causal GQA RoPE case with a KV cache and a padded row, its stages, a cotangent and tangents."""
    X, W, pos = _inputs(seed, s=5)
    rng = np.random.default_rng(seed + 100)
    P = 2
    pk, pv = rng.uniform(-1, 1, (2, 2, P, 4)), rng.uniform(-1, 1, (2, 2, P, 4))
    mask = np.ones((2, P + 5), dtype=bool)
    mask[1, :3] = False
    c = Config(4, 2, 4, True, "rope")
    st = _stages(X, W, pos + P, c, mask, pk, pv)
    g = rng.uniform(-1, 1, st["out"].shape)
    tangents = {"hidden": rng.uniform(-1, 1, X.shape), **{n: rng.uniform(-1, 1, w.shape) for n, w in W.items()}}
    return st, c, g, tangents


def adjoint_residual(seed=7, vjp=None) -> float:
    """|<g, J dx> - sum_roles <grad_role, dx_role>| / (rho M) for the case of _adjoint_case; vjp
    (st, g, config) -> {role: gradient} defaults to the reference's fast VJP."""
    import math


    st, c, g, tangents = _adjoint_case(seed)
    grads = (vjp or backward.vjp_from_stages)(st, g, c)
    lhs = math.fsum((g * backward.jvp_from_stages(st, tangents, c)).ravel())
    rhs = math.fsum(math.fsum((grads[r] * tangents[r]).ravel()) for r in backward.ROLES)
    N = backward.magnitudes(st, g, c)
    M = math.fsum(math.fsum((N[r] * np.abs(tangents[r])).ravel()) for r in backward.ROLES)
    rho = max(backward.error_factor(st, c, u=U, a=U, t=U, angle=U).values())
    return abs(lhs - rhs) / (rho * M)


@register(id="attention.backward-adjoint", bound=2.0,
          statement="the attention backward is the adjoint of the forward's Jacobian: <J^T g, dx> = <g, J dx> "
          "for hidden and the four weights (causal GQA RoPE, KV cache, padding; in units of the derived error)")
def backward_adjoint() -> float:
    """Residual: |<g, J dx> - sum_r <grad_r, dx_r>| / (rho M), grad = the fast VJP (backward.py),
    J dx = the fast JVP (jvp_from_stages), M = sum_r <N_r, |dx_r|> with N the VJP on magnitudes
    (backward.magnitudes), rho = the largest of backward.error_factor in float64 units. Both sides
    are the same bilinear form sum of products of g, the stages and dx; every product in either
    is bounded by the corresponding term of M, and each side's rounding is within rho M (the
    JVP runs the same kinds of dot products over the same lengths: D, d, the visible keys, hq d,
    RoPE's rotation), the final dot products summed exactly (math.fsum). So the residual is at
    most 2 in these units (about 10^-8 observed: rho is a worst case); a backward missing the 1/sqrt(d)
    scale gives about 10^6."""
    return adjoint_residual()


def _bias_adjoint_case(seed, encoding):
    """A case with T5's table (causal, new tokens at 9.. after a cache of 2: exact and logarithmic
    buckets) or FIRE's MLP (bidirectional, L = 2.5 between the positions), its stages, a cotangent
    and tangents of every role, the bias's parameters included."""
    X, W, pos = _inputs(seed, s=4)
    rng = np.random.default_rng(seed + 200)
    P = 2
    pk, pv = rng.uniform(-1, 1, (2, 2, P, 4)), rng.uniform(-1, 1, (2, 2, P, 4))
    mask = np.ones((2, P + 4), dtype=bool)
    mask[1, :1] = False
    if encoding == "t5":
        c = Config(4, 2, 4, True, "t5", num_buckets=8, max_distance=16)
        W["rel_bias"] = rng.uniform(-2, 2, (8, 4))
        pos = pos + 9
    else:
        c = Config(4, 2, 4, False, "fire")
        W.update(c=0.1, L_multiplier=2.5 / 512, W1=rng.uniform(-1, 1, (5, 1)), b1=rng.uniform(-1, 1, 5),
                 W2=rng.uniform(-0.5, 0.5, (4, 5)), b2=rng.uniform(-0.5, 0.5, 4))
        pos = pos + P
    st = _stages(X, W, pos, c, mask, pk, pv)
    g = rng.uniform(-1, 1, st["out"].shape)
    tangents = {"hidden": rng.uniform(-1, 1, X.shape)}
    tangents.update({n: rng.uniform(-1, 1, np.shape(st["W"][n])) for n in roles(c) if n != "hidden"})
    return st, c, g, tangents


def bias_adjoint_residual(encoding, seed=11, vjp=None) -> float:
    """adjoint_residual's measure for _bias_adjoint_case, summed over every role (bias included)."""
    import math


    st, c, g, tangents = _bias_adjoint_case(seed, encoding)
    grads = (vjp or backward.vjp_from_stages)(st, g, c)
    every = backward.roles(c)
    lhs = math.fsum((g * backward.jvp_from_stages(st, tangents, c)).ravel())
    rhs = math.fsum(math.fsum(np.ravel(grads[r] * tangents[r])) for r in every)
    N = backward.magnitudes(st, g, c)
    M = math.fsum(math.fsum(np.ravel(N[r] * np.abs(tangents[r]))) for r in every)
    rho = max(backward.error_factor(st, c, u=U, a=U, t=U, angle=U).values())
    return abs(lhs - rhs) / (rho * M)


@register(id="attention.bias-backward-adjoint", bound=2.0,
          statement="the attention backward is the adjoint of the forward's Jacobian for the learned biases' "
          "parameters too: <J^T g, dx> = <g, J dx> with T5's table and FIRE's MLP among the inputs (causal T5 "
          "with logarithmic buckets, bidirectional FIRE; KV cache, padding; in units of the derived error)")
def bias_backward_adjoint() -> float:
    """Residual: the larger of bias_adjoint_residual("t5") and ("fire"), the measure of
    attention.backward-adjoint with the bias's parameters among the roles: J dx adds the bias's
    tangent db (T5's table read at the buckets, exact; FIRE's bias_jvp) to the logits' tangent,
    J^T g adds the bias's gradients (T5's scatter of dS, FIRE's bias_vjp of dS); M includes their
    magnitude terms (backward.magnitudes) and rho their factors (backward.error_factor), so the
    residual stays at most 2 in these units. A bias gradient taken from dZ (the logit scale
    applied to the bias's cotangent) gives about 2 x 10^6; observed about 3 x 10^-7."""
    return max(bias_adjoint_residual("t5"), bias_adjoint_residual("fire"))
