"""Numba @njit kernels of the Transformer-XL scores (backend "cpu"). Never fastmath: each dot
product is summed left to right in float64, in the CUDA kernels' order, and the result stays
within reference.transformer_xl.fast_bound of the exact scores."""

import math

import numba
import numpy as np


@numba.njit(cache=True, fastmath=False)
def project_kernel(R, w, out):
    """out[p, o] = sum_c w[o, c] R[p, c]: r_p = W_r R_p for each distinct distance p."""
    for p in range(R.shape[0]):
        for o in range(w.shape[0]):
            acc = 0.0
            for c in range(w.shape[1]):
                acc += w[o, c] * R[p, c]
            out[p, o] = acc


@numba.njit(cache=True, fastmath=False)
def score_kernel(q, k, u, v, r, index, out):
    """out[h, i, j] = ((q_i + u) . k_j + (q_i + v) . r_index[i, j]) / sqrt(d_head), per head."""
    n_head, d_head = q.shape[1], q.shape[2]
    root = math.sqrt(d_head)
    for h in range(n_head):
        for i in range(q.shape[0]):
            for j in range(k.shape[0]):
                p = index[i, j]
                content = 0.0
                position = 0.0
                for e in range(d_head):
                    content += (q[i, h, e] + u[h, e]) * k[j, h, e]
                    position += (q[i, h, e] + v[h, e]) * r[p, h * d_head + e]
                out[h, i, j] = (content + position) / root


def score(q, k, u, v, w, R, index) -> np.ndarray:
    r = np.empty((R.shape[0], w.shape[0]))
    project_kernel(np.ascontiguousarray(R), np.ascontiguousarray(w), r)
    out = np.empty((q.shape[1], q.shape[0], k.shape[0]))
    c = np.ascontiguousarray
    score_kernel(c(q), c(k), c(u), c(v), r, c(index), out)
    return out
