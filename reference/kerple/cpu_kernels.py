"""Numba @njit kernel of the KERPLE bias (backend "cpu"). Never fastmath: the same operations as
the NumPy backend (log1p or pow, then one product), so within FAST_ULPS of the exact value."""

import math

import numba
import numpy as np


@numba.njit(cache=True, fastmath=False)
def bias_kernel(r1, r2, qp, kp, log_variant, out):
    for h in range(r1.shape[0]):
        for i in range(qp.shape[0]):
            for j in range(kp.shape[0]):
                d = float(abs(qp[i] - kp[j]))
                if log_variant:
                    out[h, i, j] = -r1[h] * math.log1p(r2[h] * d)
                else:
                    out[h, i, j] = -r1[h] * d ** r2[h]


def bias(r1, r2, qp, kp, log_variant: bool) -> np.ndarray:
    out = np.empty((r1.shape[0], qp.shape[0], kp.shape[0]))
    bias_kernel(np.ascontiguousarray(r1), np.ascontiguousarray(r2), np.ascontiguousarray(qp),
                np.ascontiguousarray(kp), log_variant, out)
    return out
