"""Transformer-XL identities: the reference code's relative-shift trick and the relative form's
independence of the segment boundary."""

from __future__ import annotations

import math

import numpy as np

from reference.identities import register
from reference.transformer_xl import distances, fast_bound, score, sinusoid

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
