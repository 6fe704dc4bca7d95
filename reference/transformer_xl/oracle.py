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


def score_exact(q, k, u, v, r_weight, mlen, d_model, clamp_len):
    f = lambda a: [[mpmath.mpf(float(x)) for x in row] for row in np.asarray(a, dtype=np.float64)]  # noqa: E731
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    qlen, n_head, d_head = q.shape
    klen = k.shape[0]
    W, U, V = f(r_weight), f(u), f(v)
    half = d_model // 2
    omega = [mpmath.exp(-(mpmath.mpf(2 * c) / d_model) * mpmath.log(10000)) for c in range(half)]
    out = np.empty((n_head, qlen, klen), dtype=object)
    for h in range(n_head):
        rows = W[h * d_head:(h + 1) * d_head]
        for i in range(qlen):
            qi = [mpmath.mpf(float(x)) for x in q[i, h]]
            for j in range(klen):
                kj = [mpmath.mpf(float(x)) for x in k[j, h]]
                t = _relative(i, j, mlen, clamp_len)
                R = [mpmath.sin(t * w) for w in omega] + [mpmath.cos(t * w) for w in omega]
                r = [mpmath.fdot(row, R) for row in rows]
                a, b = mpmath.fdot(qi, kj), mpmath.fdot(qi, r)
                c, d = mpmath.fdot(U[h], kj), mpmath.fdot(V[h], r)
                out[h, i, j] = (a + b + c + d) / mpmath.sqrt(d_head)
    return out
