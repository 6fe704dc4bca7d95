"""numba.cuda kernel of the score form's backward (backend "cuda"). Never fastmath.

Runs on a real GPU where one exists and under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set
before numba.cuda is first imported) elsewhere. The rotations come from the phase's cuda kernels
(reference.numerics); this module computes the reduction between them (backward.score_vjp), the
sums of cpu_kernels.weighted_sum_kernel: one thread per output element (grid-stride) adds the terms of
its sum from 0.0 in increasing j (resp. i). No atomics: each thread owns its output and the order
is fixed, so the result is deterministic. NVVM contracts each multiply-add into one fma.rn.f64,
which rounds once where the CPU rounds twice: results may differ from the CPU's in the last bits,
and stay within the same bound (a recursive dot product of n terms errs by at most gamma_n of
the sum of |terms| with or without FMA; Higham, 2nd ed., sec. 3.1 and 2.6).

``PTX_SIGNATURES`` lists every kernel with the exact signature the host wrapper launches it at,
so tests can compile each one to PTX for sm_80 and sm_90 with numba.cuda.compile_ptx. The launch
geometry and the device check are the shared ones (reference/numerics/cuda_launch.py); the
rotations this kernel sits between are the phase's cuda kernels (reference/numerics/cuda_kernels.py).
"""

import numpy as np
from numba import cuda, float64, int64

from reference.numerics.cuda_launch import THREADS_PER_BLOCK, blocks, check_device, to_device

__all__ = ["PTX_SIGNATURES", "THREADS_PER_BLOCK", "weighted_sum_kernel", "weighted_sums"]


def weighted_sum_kernel(w, v, over_keys, out):
    """over_keys = 1: out[b, i, h, e] = sum_j w[b, h, i, j] v[b, j, h, e]; over_keys = 0:
    out[b, j, h, e] = sum_i w[b, h, i, j] v[b, i, h, e] (grid-stride, one thread per element)."""
    nb, n_out, nh, d = out.shape[0], out.shape[1], out.shape[2], out.shape[3]
    n_terms = v.shape[1]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, nb * n_out * nh * d, stride):
        e = k % d
        rest = k // d
        h = rest % nh
        rest = rest // nh
        o = rest % n_out
        b = rest // n_out
        acc = 0.0
        for t in range(n_terms):
            wt = w[b, h, o, t] if over_keys else w[b, h, t, o]
            acc += wt * v[b, t, h, e]
        out[b, o, h, e] = acc


_SIG_WEIGHTED_SUM = (float64[:, :, :, ::1], float64[:, :, :, ::1], int64, float64[:, :, :, ::1])

# (Python function, argument types) of every kernel, as launched by the wrapper below.
PTX_SIGNATURES = [(weighted_sum_kernel, _SIG_WEIGHTED_SUM)]

_weighted_sum_jit = cuda.jit(weighted_sum_kernel)


def _weighted_sum(d_w, v: np.ndarray, over_keys: int, shape) -> np.ndarray:
    """One launch: the sums into a new float64 array of ``shape``."""
    if 0 in shape:  # head_dim 0: nothing to fill, nothing to launch
        return np.zeros(shape)
    d_out = cuda.device_array(shape, dtype=np.float64)
    _weighted_sum_jit[blocks(int(np.prod(shape))), THREADS_PER_BLOCK](
        d_w, to_device(v, np.float64), np.int64(over_keys), d_out)
    return d_out.copy_to_host()


def weighted_sums(w: np.ndarray, qr: np.ndarray, kr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Host wrapper: (A like qr, B like kr) from W [b, h, sq, sk], qr [b, sq, h, d], kr [b, sk, h, d]
    (W sent to the device once)."""
    check_device()
    if w.size == 0:  # no query or no key: every sum is empty, 0
        return np.zeros(qr.shape), np.zeros(kr.shape)
    d_w = to_device(w, np.float64)
    return _weighted_sum(d_w, kr, 1, qr.shape), _weighted_sum(d_w, qr, 0, kr.shape)
