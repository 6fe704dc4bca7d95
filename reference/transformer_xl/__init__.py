"""reference.transformer_xl: Transformer-XL relative attention scores (Dai et al., arXiv 1901.02860,
sec. 3.3) in float64, as ``RelPartialLearnableMultiHeadAttn`` computes them
(kimiyoung/transformer-xl pytorch/mem_transformer.py @44781ed2, L212-256).

For query i (0..qlen-1) of the current segment and key j (0..klen-1, klen = qlen + mlen: mlen
memory slots first), per head h:

    score[h, i, j] = ( (q[i,h] + u[h]) . k[j,h]  +  (q[i,h] + v[h]) . r[i + mlen - j, h] ) / sqrt(d_head)

The first product holds the paper's terms (a) content and (c) global content bias (u =
``r_w_bias``), the second (b) content-position and (d) global position bias (v = ``r_r_bias``).
r[p, h] is head h's slice of r_weight R_p (r_weight = ``r_net.weight`` [n_head * d_head, d_model],
no bias), R_p = [sin(p w) | cos(p w)] (concatenated halves, ``PositionalEmbedding`` L15-31) with
w_c = 10000^(-2c/d_model), c = 0..d_model/2 - 1, and the distance p clamped to clamp_len when
clamp_len > 0. Keys j > i + mlen are masked in attention (not graded); they hold the formula at the
negative distance here. The reference code reaches r[i + mlen - j] with its ``_rel_shift``
(identities.py checks that trick against this direct form).

API: ``score(q, k, u, v, r_weight, *, mlen, d_model, clamp_len, backend, mode)`` -> [n_head, qlen,
klen], q [qlen, n_head, d_head], k [klen, n_head, d_head], u, v [n_head, d_head];
``score_entries(..., heads, rows, keys)``: the golden scores of a subgrid only (a model's full
shape); ``distances(qlen, mlen, clamp_len)``; ``sinusoid(positions, d_model)`` (R rows); ``fast_bound``.
Golden mode: every score computed at 200 bits from the exact sinusoid and rounded once (faithful,
certified against oracle.py). Fast mode (cpu Numba, cuda, numpy; R from the shared sinusoid
table, reference/numerics/sinusoid.py, exactly reduced): within ``fast_bound``. Never imports
torch.
"""

from .core import BASE, distances, fast_bound, score, score_entries, sinusoid

__all__ = ["BASE", "distances", "fast_bound", "score", "score_entries", "sinusoid"]
