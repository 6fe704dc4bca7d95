"""numba.cuda kernel of the ALiBi bias (backend "cuda"), one thread per element (grid-stride).
A single ``mul.rn.f64`` per element: bit-identical to the CPU kernel and NumPy.

``PTX_SIGNATURES`` lists the kernel with the signature the wrapper launches it at."""

import numpy as np
from numba import boolean, cuda, float64, int64

from reference.numerics.cuda_launch import THREADS_PER_BLOCK, blocks, check_device, to_device


def bias_kernel(m, qp, kp, causal, out):
    nh, sq, sk = out.shape[0], out.shape[1], out.shape[2]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, nh * sq * sk, stride):
        h = k // (sq * sk)
        rest = k - h * sq * sk
        i = rest // sk
        j = rest - i * sk
        d = qp[i] - kp[j]
        if not causal and d < 0:
            d = -d
        out[h, i, j] = -m[h] * d


PTX_SIGNATURES = [(bias_kernel, (float64[::1], int64[::1], int64[::1], boolean, float64[:, :, ::1]))]
_bias_jit = cuda.jit(bias_kernel)


def bias(m: np.ndarray, qp: np.ndarray, kp: np.ndarray, causal: bool) -> np.ndarray:
    check_device()
    out = np.empty((m.shape[0], qp.shape[0], kp.shape[0]))
    if out.size == 0:
        return out
    d_out = cuda.to_device(out)
    _bias_jit[blocks(out.size), THREADS_PER_BLOCK](to_device(m), cuda.to_device(qp), cuda.to_device(kp), causal, d_out)
    return d_out.copy_to_host()
