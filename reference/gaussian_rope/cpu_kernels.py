"""Numba @njit kernel of the score form's backward on the CPU (backend "cpu"). Never fastmath.

The rotations come from the phase's cpu kernels (reference.numerics); this module computes the
reduction between them (backward.score_vjp): for the weights W [b, h, sq, sk] and the rotated keys
(queries),

    grad_q's sum  A[b, i, h, e] = sum_j W[b, h, i, j] (R k)[b, j, h, e],
    grad_k's sum  B[b, j, h, e] = sum_i W[b, h, i, j] (R q)[b, i, h, e],

each element a recursive summation from 0.0 in increasing j (resp. i), one rounded product and
one rounded addition per term (no FMA: LLVM contracts nothing without fastmath). The CUDA kernel
(cuda_kernels.py) sums the same terms in the same order.
"""

import numba
import numpy as np


@numba.njit(cache=True, fastmath=False)
def weighted_sum_kernel(w, v, over_keys, out):
    """over_keys = 1: out[b, i, h, e] = sum_j w[b, h, i, j] v[b, j, h, e]; over_keys = 0:
    out[b, j, h, e] = sum_i w[b, h, i, j] v[b, i, h, e]. Terms in increasing order of the summed
    index; out must hold zeros on entry."""
    nb, n_out, nh, d = out.shape
    for b in range(nb):
        for h in range(nh):
            for o in range(n_out):
                for t in range(v.shape[1]):
                    wt = w[b, h, o, t] if over_keys else w[b, h, t, o]
                    for e in range(d):  # the e's are independent sums: each still adds t in order
                        out[b, o, h, e] += wt * v[b, t, h, e]


def weighted_sums(w: np.ndarray, qr: np.ndarray, kr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Host wrapper: (A like qr, B like kr) from W [b, h, sq, sk], qr [b, sq, h, d], kr [b, sk, h, d]."""
    w, qr, kr = (np.ascontiguousarray(a, dtype=np.float64) for a in (w, qr, kr))
    aq, ak = np.zeros(qr.shape), np.zeros(kr.shape)
    weighted_sum_kernel(w, kr, 1, aq)
    weighted_sum_kernel(w, qr, 0, ak)
    return aq, ak
