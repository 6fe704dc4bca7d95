"""Numba @njit kernel of the ALiBi bias (backend "cpu"). Never fastmath: -m * d is one rounding,
bit-identical to NumPy's and the CUDA kernel's."""

import numba
import numpy as np


@numba.njit(cache=True, fastmath=False)
def bias_kernel(m, qp, kp, causal, out):
    for h in range(m.shape[0]):
        for i in range(qp.shape[0]):
            for j in range(kp.shape[0]):
                d = qp[i] - kp[j]
                if not causal and d < 0:
                    d = -d
                out[h, i, j] = -m[h] * d


def bias(m: np.ndarray, qp: np.ndarray, kp: np.ndarray, causal: bool) -> np.ndarray:
    out = np.empty((m.shape[0], qp.shape[0], kp.shape[0]))
    bias_kernel(np.ascontiguousarray(m), np.ascontiguousarray(qp), np.ascontiguousarray(kp), causal, out)
    return out
