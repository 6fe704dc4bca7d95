"""Numba @njit kernel of the FIRE bias (backend "cpu"). Never fastmath: log1p, the division, and
the hidden units summed in order, within reference.fire.fast_bound."""

import math

import numba
import numpy as np


@numba.njit(cache=True, fastmath=False)
def bias_kernel(qp, kp, c, L, eps, w1, b1, w2, b2, out):
    for i in range(qp.shape[0]):
        norm = math.log1p(abs(c * max(float(qp[i]), L))) + eps
        for j in range(kp.shape[0]):
            x = math.log1p(abs(c * float(abs(qp[i] - kp[j])))) / norm
            for h in range(w2.shape[0]):
                acc = b2[h]
                for k in range(w1.shape[0]):
                    acc += w2[h, k] * max(w1[k] * x + b1[k], 0.0)
                out[h, i, j] = acc


def bias(qp, kp, c, L, eps, w1, b1, w2, b2) -> np.ndarray:
    out = np.empty((w2.shape[0], qp.shape[0], kp.shape[0]))
    a = np.ascontiguousarray
    bias_kernel(a(qp), a(kp), float(c), float(L), float(eps), a(w1), a(b1), a(w2), a(b2), out)
    return out
