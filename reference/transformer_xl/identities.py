"""Transformer-XL identities: the reference code's relative-shift trick and the relative form's
independence of the segment boundary."""

from __future__ import annotations

import math

import numpy as np

from reference.identities import register
from reference.transformer_xl import distances, fast_bound, score, sinusoid
from reference.transformer_xl.backward import score_jvp, score_vjp

# (qlen, mlen, clamp_len): no memory, memory as long as the segment, longer memory, one query
# (decoding), a clamped table.
SHAPES = ((4, 0, 0), (4, 4, 0), (3, 5, 0), (1, 7, 0), (6, 2, 0), (5, 3, 3))


def _inputs(qlen, mlen, n_head=2, d_head=8, d_model=16, seed=5):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-2, 2, (qlen, n_head, d_head)), rng.uniform(-2, 2, (qlen + mlen, n_head, d_head)),
            rng.uniform(-0.5, 0.5, (n_head, d_head)), rng.uniform(-0.5, 0.5, (n_head, d_head)),
            rng.uniform(-0.25, 0.25, (n_head * d_head, d_model)))


def rel_shift(x: np.ndarray) -> np.ndarray:
    """mem_transformer.py ``_rel_shift`` on [..., qlen, klen]: pad one zero column on the left,
    view as [klen + 1, qlen], drop the first row, view as [qlen, klen] again."""
    *lead, qlen, klen = x.shape
    padded = np.concatenate([np.zeros((*lead, qlen, 1)), x], axis=-1)
    return padded.reshape(*lead, klen + 1, qlen)[..., 1:, :].reshape(*lead, qlen, klen)


def shift_trick_scores(q, k, u, v, w, mlen, d_model, clamp_len) -> np.ndarray:
    """The reference code's way: BD_raw[i, m] = (q_i + v) . r at pos_seq[m] = klen - 1 - m (clamped),
    then ``_rel_shift``; AC as is; (AC + BD) / sqrt(d_head) (float64, NumPy)."""
    qlen, n_head, d_head = q.shape
    klen = k.shape[0]
    pos_seq = np.arange(klen - 1, -1, -1)
    if clamp_len > 0:
        pos_seq = np.minimum(pos_seq, clamp_len)
    r = (sinusoid(pos_seq, d_model, backend="numpy") @ w.T).reshape(klen, n_head, d_head)
    ac = np.einsum("ihe,jhe->hij", q + u, k)
    bd = rel_shift(np.einsum("ihe,jhe->hij", q + v, r))
    return (ac + bd) / math.sqrt(d_head)


@register(id="transformer_xl.rel-shift", bound=2.0,
          statement="the reference code's _rel_shift (pad a zero column, reshape, drop the first row) puts the "
          "term for distance i + mlen - j at every unmasked entry j <= i + mlen: it equals the direct score "
          "((qlen, mlen) = (4, 0), (4, 4), (3, 5), (1, 7), (6, 2), and (5, 3) with clamp_len 3)")
def rel_shift_equals_direct() -> float:
    """Residual: max over unmasked entries of |trick - direct| / fast_bound, the direct score from
    the cpu kernel. Bound 2: both are float64 evaluations of the same formula with the operation
    counts fast_bound covers (R within 1.5 ulp, dot products of d_model and d_head terms, the sum
    and the division), each within fast_bound of the exact score. One distance off would differ by
    the size of the position term, ~10^15 times that."""
    worst = 0.0
    for qlen, mlen, clamp in SHAPES:
        args = _inputs(qlen, mlen)
        kw = {"mlen": mlen, "d_model": 16, "clamp_len": clamp}
        direct = score(*args, backend="cpu", **kw)
        trick = shift_trick_scores(*args, mlen, 16, clamp)
        unmasked = distances(qlen, mlen)[None] >= 0
        ratio = np.abs(trick - direct) / fast_bound(*args, **kw)
        worst = max(worst, float(np.max(np.where(unmasked, ratio, 0.0))))
    return worst


@register(id="transformer_xl.segment-boundary", bound=0.0,
          statement="scores depend on positions only through i + mlen - j: a segment of qlen queries with mlen "
          "memory slots scores as the last qlen rows of memory and segment taken as one segment without memory")
def segment_boundary() -> float:
    """Residual: max |score(q, k, mlen) - score([q_mem; q], k, 0)[:, mlen:]| over every entry (cpu
    kernel, masked entries included). Bound 0: query mlen + i against key j has distance
    (mlen + i) - j = i + (mlen - j) in both, so the kernel runs the same float operations on the
    same operands (the same R row, projection and dot-product order)."""
    worst = 0.0
    for qlen, mlen, clamp in SHAPES:
        q, k, u, v, w = _inputs(qlen, mlen)
        memory_queries = np.random.default_rng(9).uniform(-2, 2, (mlen, *q.shape[1:]))
        seg = score(q, k, u, v, w, mlen=mlen, d_model=16, clamp_len=clamp, backend="cpu")
        whole = score(np.concatenate([memory_queries, q]), k, u, v, w, mlen=0, d_model=16, clamp_len=clamp,
                      backend="cpu")
        worst = max(worst, float(np.max(np.abs(seg - whole[:, mlen:]))))
    return worst


# ---- the backward pass (reference/transformer_xl/backward.py) -------------------------------------


def adjoint_scale(G, q, k, u, v, w, dq, dk, du, dv, dw, mlen, d_model, clamp_len) -> float:
    """N = s sum_hij |G_hij| sum_e [(|dq_e| + |du_e|) |k_e| + (|q_e| + |u_e|) |dk_e| + (|dq_e| + |dv_e|)
    rabs_e + (|q_e| + |v_e|) drabs_e], rabs_e = sum_c |W_ec| |R_c|, drabs_e = sum_c |dW_ec| |R_c| at
    the entry's distance: the size of every term of <G, J dx> and of <grad, dx>."""
    qlen, n_head, d_head = q.shape
    values, index = np.unique(distances(qlen, mlen, clamp_len), return_inverse=True)
    index = index.reshape(qlen, -1)
    R = np.abs(sinusoid(values, d_model, backend="numpy"))
    per_key = lambda m: (R @ np.abs(m).T).reshape(-1, n_head, d_head)[index]  # noqa: E731
    a = np.einsum("ihe,jhe->hij", np.abs(dq) + np.abs(du), np.abs(k)) + np.einsum(
        "ihe,jhe->hij", np.abs(q) + np.abs(u), np.abs(dk))
    b = np.einsum("ihe,ijhe->hij", np.abs(dq) + np.abs(dv), per_key(w)) + np.einsum(
        "ihe,ijhe->hij", np.abs(q) + np.abs(v), per_key(dw))
    return float(np.sum(np.abs(G) * (a + b))) / math.sqrt(d_head)


def adjoint_count(qlen, mlen, d_head, d_model, n_distances) -> int:
    """The derived count K_adj with |<grad, dx> - <G, J dx>| <= K_adj u N (adjoint_scale's N)."""
    lhs = qlen * (qlen + mlen) + n_distances + d_model + 10 + 2  # vjp_bound's K, the products and fsum
    rhs = d_head + d_model + 10 + 3  # fast_bound per score, their sum, the product with G and fsum
    return lhs + rhs


@register(id="transformer_xl.backward-adjoint", bound=1.0,
          statement="the VJP is the adjoint of the JVP: sum over q, k, u, v, r_weight of <grad, dx> = <G, J dx> "
          "with J dx = score(dq, k, du, dv, W) + score(q, dk, u, v, dW) (bilinear), for the six shapes of "
          "transformer_xl.rel-shift, within the derived bound K_adj u N")
def backward_adjoint() -> float:
    """Residual: max over the shapes of |lhs - rhs| / (K_adj u N) (adjoint_scale, adjoint_count);
    fast VJP and cpu forward; lhs and the contraction with G summed by math.fsum. Bound 1.

    Derivation: every term of either side is a product G s x y (R) whose absolute value is a term
    of N. lhs: each gradient within vjp_bound (K u times its terms' sum, K = n_pairs + n_t +
    d_model + 10), the product with dx and the correctly rounded fsum add 2u: (K + 2) u N. rhs:
    each score within fast_bound ((d_head + d_model + 10) u of its terms, fast_bound's counts
    summed), their sum u, the product with G and fsum 2u: (d_head + d_model + 13) u N."""
    rng = np.random.default_rng(20260115)
    worst = 0.0
    for qlen, mlen, clamp in SHAPES:
        x = _inputs(qlen, mlen)
        d = _inputs(qlen, mlen, seed=int(rng.integers(1 << 30)))
        G = rng.uniform(-2, 2, (x[0].shape[1], qlen, qlen + mlen))
        kw = {"mlen": mlen, "d_model": 16, "clamp_len": clamp}
        grads = score_vjp(G, *x, **kw)
        lhs = math.fsum(float(p) for g, dx in zip(grads.values(), d) for p in (g * dx).reshape(-1))
        rhs = math.fsum((G * score_jvp(*d, *x, **kw)).reshape(-1).tolist())
        n_t = np.unique(distances(qlen, mlen, clamp)).size
        bound = adjoint_count(qlen, mlen, x[0].shape[2], 16, n_t) * 2.0**-53 * adjoint_scale(G, *x, *d, mlen, 16, clamp)
        worst = max(worst, abs(lhs - rhs) / bound)
    return worst
