"""Diagnosis of transformer_xl.score by mutants (conformance.core.mutants): the reference formula
rebuilt in float64 with one known bug each, compared on the graded entries.

- ``xl-shift-off-by-one``: key j meets R at i + mlen - j + 1 or - 1 (then clamped): pos_seq
  starting at klen instead of klen - 1, or the relative shift one column off;
- ``xl-u-v-swapped``: v with the content term and u with the position term;
- ``xl-r-interleaved``: R = [sin w_0, cos w_0, sin w_1, cos w_1, ...] instead of [sin | cos].
"""

from __future__ import annotations

import math

import numpy as np

from conformance.core.mutants import Mutant, closest_mutant
from conformance.results import Diagnosis
from reference.numerics.sinusoid import table as sinusoid_table
from reference.transformer_xl import BASE


def model_scores(q, k, u, v, w, dist, d_model, layout="concatenated") -> np.ndarray:
    """((q_i + u) . k_j + (q_i + v) . (W R_dist[i, j])) / sqrt(d_head) [n_head, qlen, klen], float64,
    R in the given sinusoid layout, dist int64 [qlen, klen] (already clamped)."""
    qlen, n_head, d_head = q.shape
    values, index = np.unique(dist, return_inverse=True)
    R = sinusoid_table(values, d_model, layout=layout, exponent="2i/d", base=BASE, backend="numpy")
    r = (R @ w.T).reshape(-1, n_head, d_head)[index.reshape(dist.shape)]
    content = np.einsum("ihe,jhe->hij", q + u, k)
    position = np.einsum("ihe,ijhe->hij", q + v, r)
    return (content + position) / math.sqrt(d_head)


def raw_distances(qlen, mlen) -> np.ndarray:
    """i + mlen - j [qlen, qlen + mlen], before any clamp."""
    return np.arange(qlen)[:, None] + mlen - np.arange(qlen + mlen)[None, :]


def mutants(inputs, spec, raw=None) -> list:
    """``raw``: the unclamped distances of the graded subgrid (default: every query's and key's)."""
    q, k, u, v, w = (inputs[r] for r in ("q", "k", "u", "v", "r_weight"))
    raw = raw_distances(q.shape[0], spec.mlen) if raw is None else raw

    def clamp(d):
        return np.minimum(d, spec.clamp_len) if spec.clamp_len > 0 else d

    dist = clamp(raw)
    return [
        Mutant("xl-shift-off-by-one", "key j meets R at distance i + mlen - j + 1 (pos_seq starting at klen, "
               "or the relative shift one column off)",
               lambda: model_scores(q, k, u, v, w, clamp(raw + 1), spec.d_model), "shift"),
        Mutant("xl-shift-off-by-one", "key j meets R at distance i + mlen - j - 1 (the relative shift one column "
               "off the other way)", lambda: model_scores(q, k, u, v, w, clamp(raw - 1), spec.d_model), "shift"),
        Mutant("xl-u-v-swapped", "u (r_w_bias) and v (r_r_bias) swapped: v added to the query for the content "
               "term, u for the position term", lambda: model_scores(q, k, v, u, w, dist, spec.d_model), "bias"),
        Mutant("xl-r-interleaved", "R built interleaved [sin w_0, cos w_0, sin w_1, ...] instead of the "
               "concatenated [sin | cos] halves", lambda: model_scores(q, k, u, v, w, dist, spec.d_model,
                                                                      "interleaved"), "table"),
    ]


def diagnose(out, reference, mask, inputs, spec, floor, raw=None) -> list:
    """[Diagnosis] of the closest mutant explaining ``out`` on the graded entries ([] if none does)."""
    full = np.broadcast_to(mask, out.shape)
    found = closest_mutant(np.where(full, out, 0.0), np.where(full, reference, 0.0), mutants(inputs, spec, raw),
                           full, floor)
    if found is None:
        return []
    mutant, _, _ = found
    return [Diagnosis(mutant.code, mutant.message)]
