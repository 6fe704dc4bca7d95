"""mpmath oracle for the Transformer-XL score, written again from the paper's four terms (no code
shared with core): for each head, query i and key j separately,

    A = q_i . k_j (a) + q_i . r (b) + u . k_j (c) + v . r (d),   score = A / sqrt(d_head),

with r = W_r R_t at the distance t = i + mlen - j (capped at clamp_len when clamp_len > 0),
R_t[c] = sin(t w_c) and R_t[d_model/2 + c] = cos(t w_c), w_c = exp(-(2c / d_model) ln 10000).
Exact dot products (mpmath.fdot) at the caller's precision (200 bits)."""

from __future__ import annotations

import mpmath
import numpy as np


def _relative(i, j, mlen, clamp_len):
    t = i + mlen - j
    return min(t, clamp_len) if clamp_len > 0 else t


def score_exact(q, k, u, v, r_weight, mlen, d_model, clamp_len, heads=None, rows=None, keys=None):
    """object [len(heads), len(rows), len(keys)] of exact scores (each None: all). r = W_r R_t is
    computed once per head and distance t (the cost at a model's d_model 1024)."""
    f = lambda a: [[mpmath.mpf(float(x)) for x in row] for row in np.asarray(a, dtype=np.float64)]  # noqa: E731
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    qlen, n_head, d_head = q.shape
    klen = k.shape[0]
    heads = range(n_head) if heads is None else heads
    rows_ = range(qlen) if rows is None else rows
    keys_ = range(klen) if keys is None else keys
    W, U, V = np.asarray(r_weight, dtype=np.float64), f(u), f(v)
    half = d_model // 2
    omega = [mpmath.exp(-(mpmath.mpf(2 * c) / d_model) * mpmath.log(10000)) for c in range(half)]
    position_rows = {}

    def r_of(h, t):
        if (h, t) not in position_rows:
            R = [mpmath.sin(t * w) for w in omega] + [mpmath.cos(t * w) for w in omega]
            position_rows[h, t] = [mpmath.fdot(row, R) for row in f(W[h * d_head:(h + 1) * d_head])]
        return position_rows[h, t]

    out = np.empty((len(heads), len(rows_), len(keys_)), dtype=object)
    for a, h in enumerate(heads):
        for b, i in enumerate(rows_):
            qi = [mpmath.mpf(float(x)) for x in q[i, h]]
            for c_, j in enumerate(keys_):
                kj = [mpmath.mpf(float(x)) for x in k[j, h]]
                r = r_of(h, _relative(i, j, mlen, clamp_len))
                a_, b_ = mpmath.fdot(qi, kj), mpmath.fdot(qi, r)
                c, d = mpmath.fdot(U[h], kj), mpmath.fdot(V[h], r)
                out[a, b, c_] = (a_ + b_ + c + d) / mpmath.sqrt(d_head)
    return out
