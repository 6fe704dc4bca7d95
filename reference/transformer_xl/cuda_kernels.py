"""numba.cuda kernels of the Transformer-XL scores (backend "cuda"), one thread per output element
(grid-stride): the CPU kernels' operations in their order, with correctly rounded sqrt.rn and
div.rn. NVVM contracts each multiply-add of the dot products into one fma.rn.f64, so results may
differ from the CPU kernel in the last bits. An fma rounds once where the CPU rounds twice, so
the GPU stays within reference.transformer_xl.fast_bound.

``PTX_SIGNATURES`` lists each kernel with the signature the wrapper launches it at."""

import math

import numpy as np
from numba import cuda, float64, int64

THREADS_PER_BLOCK = 128
_MAX_BLOCKS = 65535


def project_kernel(R, w, out):
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


PTX_SIGNATURES = [
    (project_kernel, (float64[:, ::1], float64[:, ::1], float64[:, ::1])),
    (score_kernel, (float64[:, :, ::1], float64[:, :, ::1], float64[:, ::1], float64[:, ::1], float64[:, ::1],
                    int64[:, ::1], float64[:, :, ::1])),
]
_project_jit = cuda.jit(project_kernel)
_score_jit = cuda.jit(score_kernel)


def _blocks(n):
    return max(1, min(_MAX_BLOCKS, (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK))


def score(q, k, u, v, w, R, index) -> np.ndarray:
    if not cuda.is_available():
        raise ValueError("backend: 'cuda' needs a CUDA GPU, or NUMBA_ENABLE_CUDASIM=1 set before numba.cuda is imported")
    c = np.ascontiguousarray
    r = cuda.device_array((R.shape[0], w.shape[0]), dtype=np.float64)
    _project_jit[_blocks(r.size), THREADS_PER_BLOCK](cuda.to_device(c(R)), cuda.to_device(c(w)), r)
    out = cuda.device_array((q.shape[1], q.shape[0], k.shape[0]), dtype=np.float64)
    _score_jit[_blocks(out.size), THREADS_PER_BLOCK](cuda.to_device(c(q)), cuda.to_device(c(k)), cuda.to_device(c(u)),
                                                     cuda.to_device(c(v)), r, cuda.to_device(c(index)), out)
    return out.copy_to_host()
