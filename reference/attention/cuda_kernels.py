"""numba.cuda kernels of the attention forward (backend "cuda"): the CPU kernels' algorithms.

``project_kernel``: one thread per output element (grid-stride), a Dot2 dot product with the
product's error taken exactly by ``cuda.fma`` (a*b - p is exact in one FMA), and Knuth's TwoSum.
Every product p is ``libdevice.dmul_rn``, which NVVM never contracts into an FMA with the sum
that follows (its default contraction would break the error-free transformation).
``attend_kernel``: one thread per (batch, query, head) row: Dot2 logits, the row maximum, exp
(libdevice, < 1 ulp), a compensated denominator and Dot2 for the weighted values; ``scratch``
holds each row's exponentials. The compiler may contract ``dot * scale + bias`` into one FMA,
so results agree with the CPU kernels within a few ulps, not bit for bit.

``PTX_SIGNATURES`` lists the kernels with the signatures the wrappers launch them at."""

import math

import numpy as np
from numba import boolean, config, cuda, float64, int64
from numba.cuda import libdevice

THREADS_PER_BLOCK = 128
_MAX_BLOCKS = 65535


def _plain_mul(a, b):
    return a * b


# The simulator runs kernels as Python, where libdevice stubs have no body.
_mul = _plain_mul if config.ENABLE_CUDASIM else libdevice.dmul_rn


@cuda.jit(device=True)
def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@cuda.jit(device=True)
def _dot_rows(x, y):
    """Dot2 of two 1-D arrays of equal length."""
    s, c = 0.0, 0.0
    for k in range(x.shape[0]):
        p = _mul(x[k], y[k])
        e = cuda.fma(x[k], y[k], -p)
        s, f = _two_sum(s, p)
        c += e + f
    return s + c


def project_kernel(a, w, out):
    n, m = out.shape[0], out.shape[1]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, n * m, stride):
        i = t // m
        j = t - i * m
        out[i, j] = _dot_rows(a[i], w[j])


def attend_kernel(q, keys, values, bias, vis, scale, group, scratch, out):
    b, s, hq, d = q.shape[0], q.shape[1], q.shape[2], q.shape[3]
    K = keys.shape[1]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, b * s * hq, stride):
        bi = t // (s * hq)
        rest = t - bi * s * hq
        i = rest // hq
        h = rest - i * hq
        g = h // group
        z = scratch[t]
        top = -math.inf
        for j in range(K):
            if vis[bi, i, j]:
                z[j] = _dot_rows(q[bi, i, h], keys[bi, j, g]) * scale + bias[bi, h, i, j]
                top = max(top, z[j])
        if top == -math.inf:
            for x in range(d):
                out[bi, i, h, x] = 0.0
            continue
        total, comp = 0.0, 0.0
        for j in range(K):
            z[j] = math.exp(z[j] - top) if vis[bi, i, j] else 0.0
            total, e = _two_sum(total, z[j])
            comp += e
        total += comp
        for x in range(d):
            acc, c = 0.0, 0.0
            for j in range(K):
                p = _mul(z[j], values[bi, j, g, x])
                e = cuda.fma(z[j], values[bi, j, g, x], -p)
                acc, f = _two_sum(acc, p)
                c += e + f
            out[bi, i, h, x] = (acc + c) / total


PTX_SIGNATURES = [
    (project_kernel, (float64[:, ::1], float64[:, ::1], float64[:, ::1])),
    (attend_kernel, (float64[:, :, :, ::1], float64[:, :, :, ::1], float64[:, :, :, ::1], float64[:, :, :, ::1],
                     boolean[:, :, ::1], float64, int64, float64[:, ::1], float64[:, :, :, ::1])),
]
_project_jit = cuda.jit(project_kernel)
_attend_jit = cuda.jit(attend_kernel)


def _check():
    if not cuda.is_available():
        raise ValueError("backend: 'cuda' needs a CUDA GPU, or NUMBA_ENABLE_CUDASIM=1 set before numba.cuda "
                         "is imported")


def _blocks(n):
    return max(1, min(_MAX_BLOCKS, (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK))


def project(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """a [n, k] @ w [m, k]^T by Dot2 -> [n, m]."""
    _check()
    out = np.empty((a.shape[0], w.shape[0]))
    if out.size == 0:
        return out
    d_out = cuda.to_device(out)
    _project_jit[_blocks(out.size), THREADS_PER_BLOCK](cuda.to_device(np.ascontiguousarray(a)),
                                                       cuda.to_device(np.ascontiguousarray(w)), d_out)
    return d_out.copy_to_host()


def attend(q, keys, values, bias, vis, scale, group) -> np.ndarray:
    """As cpu_kernels.attend."""
    _check()
    out = np.empty(q.shape)
    rows = q.shape[0] * q.shape[1] * q.shape[2]
    if out.size == 0:
        return out
    a = lambda v: cuda.to_device(np.ascontiguousarray(v))  # noqa: E731
    d_out = cuda.to_device(out)
    scratch = cuda.device_array((rows, max(1, keys.shape[1])))
    _attend_jit[_blocks(rows), THREADS_PER_BLOCK](a(q), a(keys), a(values), a(bias), a(vis), float(scale),
                                                  int(group), scratch, d_out)
    return d_out.copy_to_host()
