"""Numba @njit kernels of the Transformer-XL scores and of their backward (backend "cpu"). Never
fastmath: each dot product is summed left to right in float64, in the CUDA kernels' order, and
the result stays within reference.transformer_xl.fast_bound of the exact scores (the backward:
within backward.vjp_bound, see below)."""

import math

import numba
import numpy as np


@numba.njit(cache=True, fastmath=False)
def project_kernel(R, w, out):
    """out[p, o] = sum_c w[o, c] R[p, c], c ascending: r_p = W_r R_p for each distinct distance p
    (and the backward's grad W_r = A^T R as project_kernel(A^T, R^T))."""
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


# The backward (reference.transformer_xl.backward, backend "cpu"): each gradient element is one
# sum, taken in the CUDA kernels' order (module docstring of cuda_kernels), within vjp_bound.


@numba.njit(cache=True, fastmath=False)
def query_grad_kernel(G, k, r, index, scale, out):
    """out[i, h, e] = sum_j (G[h, i, j] scale) (k[j, h, e] + r[index[i, j], h d_head + e]), j ascending."""
    d_head = k.shape[2]
    for i in range(out.shape[0]):
        for h in range(out.shape[1]):
            for e in range(d_head):
                acc = 0.0
                for j in range(k.shape[0]):
                    acc += (G[h, i, j] * scale) * (k[j, h, e] + r[index[i, j], h * d_head + e])
                out[i, h, e] = acc


@numba.njit(cache=True, fastmath=False)
def key_grad_kernel(G, q, u, scale, out):
    """out[j, h, e] = sum_i (G[h, i, j] scale) (q[i, h, e] + u[h, e]), i ascending."""
    for j in range(out.shape[0]):
        for h in range(out.shape[1]):
            for e in range(out.shape[2]):
                acc = 0.0
                for i in range(q.shape[0]):
                    acc += (G[h, i, j] * scale) * (q[i, h, e] + u[h, e])
                out[j, h, e] = acc


@numba.njit(cache=True, fastmath=False)
def bias_grad_kernel(G, k, r, index, scale, out):
    """out[0, h, e] = sum_ij Gs_hij k[j, h, e] (grad u), out[1, h, e] = sum_ij Gs_hij r[index[i, j],
    h d_head + e] (grad v), Gs = G scale, the pairs (i, j) in row-major order."""
    d_head = k.shape[2]
    for which in range(2):
        for h in range(out.shape[1]):
            for e in range(d_head):
                acc = 0.0
                for i in range(index.shape[0]):
                    for j in range(index.shape[1]):
                        y = k[j, h, e] if which == 0 else r[index[i, j], h * d_head + e]
                        acc += (G[h, i, j] * scale) * y
                out[which, h, e] = acc


@numba.njit(cache=True, fastmath=False)
def distance_sums_kernel(G, q, v, pairs, starts, scale, out):
    """out[h d_head + e, t] = sum over the pairs at distance t, pairs[starts[t]:starts[t + 1]] (flat
    i klen + j, ascending), of (G[h, i, j] scale) (q[i, h, e] + v[h, e]): A_t of the W_r gradient,
    transposed (A^T, the layout project_kernel takes for grad W_r = A^T R)."""
    n_head, d_head, klen = q.shape[1], q.shape[2], G.shape[2]
    for t in range(out.shape[1]):
        for h in range(n_head):
            for e in range(d_head):
                acc = 0.0
                for s in range(starts[t], starts[t + 1]):
                    i = pairs[s] // klen
                    j = pairs[s] - i * klen
                    acc += (G[h, i, j] * scale) * (q[i, h, e] + v[h, e])
                out[h * d_head + e, t] = acc


def score_vjp(G, q, k, u, v, w, R, index, pairs, starts, scale) -> dict:
    """{role: gradient} (reference.transformer_xl.backward, fast mode) from the validated float64
    inputs, R [n_t, d_model], index [qlen, klen] into the n_t distances, the pairs grouped by
    distance (pairs, starts) and scale = 1 / sqrt(d_head)."""
    c = np.ascontiguousarray
    G, q, k, u, v, index = c(G), c(q), c(k), c(u), c(v), c(index)
    r = np.empty((R.shape[0], w.shape[0]))
    project_kernel(c(R), c(w), r)
    grad_q, grad_k, biases = np.empty(q.shape), np.empty(k.shape), np.empty((2,) + u.shape)
    query_grad_kernel(G, k, r, index, scale, grad_q)
    key_grad_kernel(G, q, u, scale, grad_k)
    bias_grad_kernel(G, k, r, index, scale, biases)
    At, grad_w = np.empty((w.shape[0], R.shape[0])), np.empty(w.shape)
    distance_sums_kernel(G, q, v, c(pairs), c(starts), scale, At)
    project_kernel(At, c(R.T), grad_w)
    return {"q": grad_q, "k": grad_k, "u": biases[0], "v": biases[1], "r_weight": grad_w}
