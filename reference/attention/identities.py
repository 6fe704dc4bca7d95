"""Attention identities, evaluated on the fast float64 reference (backend cpu)."""

from __future__ import annotations

import numpy as np

from reference.attention import Config, forward, stages
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
