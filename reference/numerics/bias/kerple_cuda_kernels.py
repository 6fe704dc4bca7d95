"""numba.cuda kernel of the KERPLE bias (backend "cuda"), one thread per element (grid-stride).
The same operations as the CPU kernel (libdevice log1p or pow, then ``mul.rn.f64``): within
FAST_ULPS of the exact value, not necessarily bit-identical to the CPU's libm.

``PTX_SIGNATURES`` lists the kernel with the signature the wrapper launches it at."""

import math

import numpy as np
from numba import boolean, cuda, float64, int64

from reference.numerics.cuda_launch import THREADS_PER_BLOCK, blocks, check_device, to_device


def bias_kernel(r1, r2, qp, kp, log_variant, out):
    nh, sq, sk = out.shape[0], out.shape[1], out.shape[2]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, nh * sq * sk, stride):
        h = k // (sq * sk)
        rest = k - h * sq * sk
        i = rest // sk
        j = rest - i * sk
        d = qp[i] - kp[j]
        if d < 0:
            d = -d
        x = float(d)
        if log_variant:
            y = r2[h] * x
            if math.isinf(y):  # r2 d overflows: ln r2 + ln d, as the CPU kernel
                out[h, i, j] = -r1[h] * (math.log(r2[h]) + math.log(x))
            else:
                out[h, i, j] = -r1[h] * math.log1p(y)
        else:
            out[h, i, j] = -r1[h] * x ** r2[h]


PTX_SIGNATURES = [(bias_kernel, (float64[::1], float64[::1], int64[::1], int64[::1], boolean,
                                 float64[:, :, ::1]))]
_bias_jit = cuda.jit(bias_kernel)


def bias(r1, r2, qp, kp, log_variant: bool) -> np.ndarray:
    check_device()
    out = np.empty((r1.shape[0], qp.shape[0], kp.shape[0]))
    if out.size == 0:
        return out
    d_out = cuda.to_device(out)
    _bias_jit[blocks(out.size), THREADS_PER_BLOCK](to_device(r1), to_device(r2), cuda.to_device(qp),
                                                   cuda.to_device(kp), log_variant, d_out)
    return d_out.copy_to_host()
