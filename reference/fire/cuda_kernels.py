"""numba.cuda kernel of the FIRE bias (backend "cuda"), one thread per element (grid-stride): the
CPU kernel's operations in its order (libdevice log1p), within reference.fire.fast_bound.

``PTX_SIGNATURES`` lists the kernel with the signature the wrapper launches it at."""

import math

import numpy as np
from numba import cuda, float64, int64

THREADS_PER_BLOCK = 128
_MAX_BLOCKS = 65535


def bias_kernel(qp, kp, c, L, eps, w1, b1, w2, b2, out):
    nh, sq, sk = out.shape[0], out.shape[1], out.shape[2]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, nh * sq * sk, stride):
        h = t // (sq * sk)
        rest = t - h * sq * sk
        i = rest // sk
        j = rest - i * sk
        d = qp[i] - kp[j]
        if d < 0:
            d = -d
        norm = math.log1p(abs(c * max(float(qp[i]), L))) + eps
        x = math.log1p(abs(c * float(d))) / norm
        acc = b2[h]
        for k in range(w1.shape[0]):
            acc += w2[h, k] * max(w1[k] * x + b1[k], 0.0)
        out[h, i, j] = acc


PTX_SIGNATURES = [(bias_kernel, (int64[::1], int64[::1], float64, float64, float64, float64[::1], float64[::1],
                                 float64[:, ::1], float64[::1], float64[:, :, ::1]))]
_bias_jit = cuda.jit(bias_kernel)


def bias(qp, kp, c, L, eps, w1, b1, w2, b2) -> np.ndarray:
    if not cuda.is_available():
        raise ValueError("backend: 'cuda' needs a CUDA GPU, or NUMBA_ENABLE_CUDASIM=1 set before numba.cuda is imported")
    out = np.empty((w2.shape[0], qp.shape[0], kp.shape[0]))
    if out.size == 0:
        return out
    a = lambda v: cuda.to_device(np.ascontiguousarray(v))  # noqa: E731
    d_out = cuda.to_device(out)
    blocks = max(1, min(_MAX_BLOCKS, (out.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK))
    _bias_jit[blocks, THREADS_PER_BLOCK](a(qp), a(kp), float(c), float(L), float(eps), a(w1), a(b1), a(w2), a(b2),
                                         d_out)
    return d_out.copy_to_host()
