"""numba.cuda kernels of the Transformer-XL scores (backend "cuda"), one thread per output element
(grid-stride): the CPU kernels' operations in their order, with correctly rounded sqrt.rn and
div.rn. NVVM contracts each multiply-add of the dot products into one fma.rn.f64, so results may
differ from the CPU kernel in the last bits. An fma rounds once where the CPU rounds twice, so
the GPU stays within reference.transformer_xl.fast_bound.

The backward (reference.transformer_xl.backward, backend "cuda") has one thread per gradient
element, each summing its terms in a fixed order (the CPU kernels' order: j ascending for grad q,
i for grad k, the pairs (i, j) row-major for grad u and v and for each distance's sum A_t, t for
grad W_r = A^T R, which project_kernel computes from A^T and R^T), no atomics: the results do not
depend on the launch. With the fma contraction again, they stay within
reference.transformer_xl.backward.vjp_bound.

``PTX_SIGNATURES`` lists each kernel with the signature the wrapper launches it at."""

import math

import numpy as np
from numba import cuda, float64, int64

from reference.numerics.cuda_launch import THREADS_PER_BLOCK, blocks, check_device, to_device


def project_kernel(R, w, out):
    """out[p, o] = sum_c w[o, c] R[p, c], c ascending: r_p = W_r R_p (and the backward's grad W_r =
    A^T R as project_kernel(A^T, R^T))."""
    n_out = w.shape[0]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, R.shape[0] * n_out, stride):
        p = t // n_out
        o = t - p * n_out
        acc = 0.0
        for c in range(w.shape[1]):
            acc += w[o, c] * R[p, c]
        out[p, o] = acc


def score_kernel(q, k, u, v, r, index, out):
    n_head, qlen, klen = out.shape[0], out.shape[1], out.shape[2]
    d_head = q.shape[2]
    root = math.sqrt(float64(d_head))
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, n_head * qlen * klen, stride):
        h = t // (qlen * klen)
        rest = t - h * qlen * klen
        i = rest // klen
        j = rest - i * klen
        p = index[i, j]
        content = 0.0
        position = 0.0
        for e in range(d_head):
            content += (q[i, h, e] + u[h, e]) * k[j, h, e]
            position += (q[i, h, e] + v[h, e]) * r[p, h * d_head + e]
        out[h, i, j] = (content + position) / root


def query_grad_kernel(G, k, r, index, scale, out):
    """out[i, h, e] = sum_j (G[h, i, j] scale) (k[j, h, e] + r[index[i, j], h d_head + e]), j ascending."""
    qlen, n_head, d_head = out.shape[0], out.shape[1], out.shape[2]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, qlen * n_head * d_head, stride):
        i = t // (n_head * d_head)
        h = (t // d_head) % n_head
        e = t % d_head
        acc = 0.0
        for j in range(k.shape[0]):
            acc += (G[h, i, j] * scale) * (k[j, h, e] + r[index[i, j], h * d_head + e])
        out[i, h, e] = acc


def key_grad_kernel(G, q, u, scale, out):
    """out[j, h, e] = sum_i (G[h, i, j] scale) (q[i, h, e] + u[h, e]), i ascending."""
    klen, n_head, d_head = out.shape[0], out.shape[1], out.shape[2]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, klen * n_head * d_head, stride):
        j = t // (n_head * d_head)
        h = (t // d_head) % n_head
        e = t % d_head
        acc = 0.0
        for i in range(q.shape[0]):
            acc += (G[h, i, j] * scale) * (q[i, h, e] + u[h, e])
        out[j, h, e] = acc


def bias_grad_kernel(G, k, r, index, scale, out):
    """out[0, h, e] = sum_ij Gs_hij k[j, h, e] (grad u), out[1, h, e] = sum_ij Gs_hij r[index[i, j],
    h d_head + e] (grad v), Gs = G scale, the pairs (i, j) in row-major order."""
    n_head, d_head = out.shape[1], out.shape[2]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, 2 * n_head * d_head, stride):
        which = t // (n_head * d_head)
        h = (t // d_head) % n_head
        e = t % d_head
        acc = 0.0
        for i in range(index.shape[0]):
            for j in range(index.shape[1]):
                y = k[j, h, e] if which == 0 else r[index[i, j], h * d_head + e]
                acc += (G[h, i, j] * scale) * y
        out[which, h, e] = acc


def distance_sums_kernel(G, q, v, pairs, starts, scale, out):
    """out[h d_head + e, t] = sum over the pairs at distance t, pairs[starts[t]:starts[t + 1]] (flat
    i klen + j, ascending), of (G[h, i, j] scale) (q[i, h, e] + v[h, e]): A_t of the W_r gradient,
    transposed (A^T, the layout project_kernel takes for grad W_r = A^T R)."""
    n_out, n_t = out.shape[0], out.shape[1]
    d_head, klen = q.shape[2], G.shape[2]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, n_out * n_t, stride):
        o = t // n_t
        p = t - o * n_t
        h = o // d_head
        e = o - h * d_head
        acc = 0.0
        for s in range(starts[p], starts[p + 1]):
            i = pairs[s] // klen
            j = pairs[s] - i * klen
            acc += (G[h, i, j] * scale) * (q[i, h, e] + v[h, e])
        out[o, p] = acc


_F2, _F3 = float64[:, ::1], float64[:, :, ::1]
PTX_SIGNATURES = [
    (project_kernel, (_F2, _F2, _F2)),
    (score_kernel, (_F3, _F3, _F2, _F2, _F2, int64[:, ::1], _F3)),
    (query_grad_kernel, (_F3, _F3, _F2, int64[:, ::1], float64, _F3)),
    (key_grad_kernel, (_F3, _F3, _F2, float64, _F3)),
    (bias_grad_kernel, (_F3, _F3, _F2, int64[:, ::1], float64, _F3)),
    (distance_sums_kernel, (_F3, _F3, _F2, int64[::1], int64[::1], float64, _F2)),
]
_project_jit = cuda.jit(project_kernel)
_score_jit = cuda.jit(score_kernel)
_query_grad_jit = cuda.jit(query_grad_kernel)
_key_grad_jit = cuda.jit(key_grad_kernel)
_bias_grad_jit = cuda.jit(bias_grad_kernel)
_distance_sums_jit = cuda.jit(distance_sums_kernel)


def _project(R, w):
    """R W^T, [R rows, w rows], of two device arrays, on the device (project_kernel)."""
    r = cuda.device_array((R.shape[0], w.shape[0]), dtype=np.float64)
    _project_jit[blocks(r.size), THREADS_PER_BLOCK](R, w, r)
    return r


def score(q, k, u, v, w, R, index) -> np.ndarray:
    check_device()
    r = _project(to_device(R), to_device(w))
    out = cuda.device_array((q.shape[1], q.shape[0], k.shape[0]), dtype=np.float64)
    _score_jit[blocks(out.size), THREADS_PER_BLOCK](to_device(q), to_device(k), to_device(u), to_device(v), r,
                                                    to_device(index), out)
    return out.copy_to_host()


def score_vjp(G, q, k, u, v, w, R, index, pairs, starts, scale) -> dict:
    """{role: gradient} (reference.transformer_xl.backward, fast mode) from the validated float64
    inputs, R [n_t, d_model], index [qlen, klen] into the n_t distances, the pairs grouped by
    distance (pairs, starts) and scale = 1 / sqrt(d_head)."""
    check_device()
    empty = lambda shape: cuda.device_array(shape, dtype=np.float64)  # noqa: E731
    r = _project(to_device(R), to_device(w))
    G_d, q_d, k_d, index_d = to_device(G), to_device(q), to_device(k), to_device(index)
    grad_q, grad_k, biases, At = empty(q.shape), empty(k.shape), empty((2,) + u.shape), empty((w.shape[0], R.shape[0]))
    _query_grad_jit[blocks(grad_q.size), THREADS_PER_BLOCK](G_d, k_d, r, index_d, scale, grad_q)
    _key_grad_jit[blocks(grad_k.size), THREADS_PER_BLOCK](G_d, q_d, to_device(u), scale, grad_k)
    _bias_grad_jit[blocks(biases.size), THREADS_PER_BLOCK](G_d, k_d, r, index_d, scale, biases)
    _distance_sums_jit[blocks(At.size), THREADS_PER_BLOCK](G_d, q_d, to_device(v), to_device(pairs), to_device(starts),
                                                           scale, At)
    b = biases.copy_to_host()
    return {"q": grad_q.copy_to_host(), "k": grad_k.copy_to_host(), "u": b[0], "v": b[1],
            "r_weight": _project(At, to_device(R.T)).copy_to_host()}
