"""numba.cuda kernels for RoPE (backend "cuda"). Never fastmath.

Runs on a real GPU where one exists and under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set
before numba.cuda is first imported) elsewhere. The angle math is ddmath.py compiled as device
functions with every product bound to ``libdevice.dmul_rn``, which NVVM never contracts into an
FMA (its default FMA contraction would break Dekker's error-free products). sin/cos are
libdevice's (documented max error 2 ulp on the hi word before the lo-word correction).

``PTX_SIGNATURES`` lists every kernel with the exact signature the host wrappers launch it at,
so tests can compile each one to PTX for sm_80 and sm_90 with numba.cuda.compile_ptx.
"""

import numpy as np
from numba import config, cuda, float64, int64
from numba.cuda import libdevice

from . import ddmath

# The simulator runs kernels as Python, where libdevice stubs have no body: plain products
# there, FMA-proof dmul_rn on the device.
_mul = ddmath.mul if config.ENABLE_CUDASIM else libdevice.dmul_rn
dd = ddmath.jit_family(cuda.jit(device=True), _mul)
_sincos_angle = dd.sincos_angle
_rotate = dd.rotate

THREADS_PER_BLOCK = 128
_MAX_BLOCKS = 65535


def cos_sin_kernel(positions, theta_hi, theta_lo, cos_out, sin_out):
    """cos_out[t, i], sin_out[t, i] = cos, sin of positions[t] * theta_i (grid-stride, 1-D)."""
    half = theta_hi.shape[0]
    total = positions.shape[0] * half
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, total, stride):
        t = k // half
        i = k - t * half
        s, c = _sincos_angle(float64(positions[t]), theta_hi[i], theta_lo[i])
        cos_out[t, i] = c
        sin_out[t, i] = s


def apply_kernel(y, positions, theta_hi, theta_lo, layout):
    """Rotate the pairs of y [b, s, h, d] in place; one thread per (token, pair), all heads.

    layout 0 = half (i, i + r/2), 1 = interleaved (2i, 2i + 1). The tail is never touched.
    """
    nb, ns, nh = y.shape[0], y.shape[1], y.shape[2]
    half = theta_hi.shape[0]
    total = nb * ns * half
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, total, stride):
        tok = k // half
        i = k - tok * half
        bi = tok // ns
        si = tok - bi * ns
        s, c = _sincos_angle(float64(positions[bi, si]), theta_hi[i], theta_lo[i])
        if layout == 0:
            j0 = i
            j1 = i + half
        else:
            j0 = 2 * i
            j1 = 2 * i + 1
        for h in range(nh):
            o0, o1 = _rotate(y[bi, si, h, j0], y[bi, si, h, j1], c, s)
            y[bi, si, h, j0] = o0
            y[bi, si, h, j1] = o1


_SIG_COS_SIN = (int64[::1], float64[::1], float64[::1], float64[:, ::1], float64[:, ::1])
_SIG_APPLY = (float64[:, :, :, ::1], int64[:, ::1], float64[::1], float64[::1], int64)

# (Python function, argument types) of every kernel, as launched by the wrappers below.
PTX_SIGNATURES = [(cos_sin_kernel, _SIG_COS_SIN), (apply_kernel, _SIG_APPLY)]

_cos_sin_jit = cuda.jit(cos_sin_kernel)
_apply_jit = cuda.jit(apply_kernel)


def _check_device():
    if not cuda.is_available():
        raise ValueError(
            "backend: 'cuda' needs a CUDA GPU, or NUMBA_ENABLE_CUDASIM=1 set before numba.cuda "
            "is imported"
        )


def _blocks(total):
    return max(1, min(_MAX_BLOCKS, (total + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK))


def cos_sin(positions, theta_hi, theta_lo):
    """Host wrapper: positions int64 [n] -> (cos, sin) float64 [n, r/2]."""
    _check_device()
    n, half = positions.shape[0], theta_hi.shape[0]
    if n == 0:
        return np.empty((0, half)), np.empty((0, half))
    d_c = cuda.device_array((n, half), dtype=np.float64)
    d_s = cuda.device_array((n, half), dtype=np.float64)
    _cos_sin_jit[_blocks(n * half), THREADS_PER_BLOCK](
        cuda.to_device(np.ascontiguousarray(positions, dtype=np.int64)),
        cuda.to_device(np.ascontiguousarray(theta_hi, dtype=np.float64)),
        cuda.to_device(np.ascontiguousarray(theta_lo, dtype=np.float64)),
        d_c,
        d_s,
    )
    return d_c.copy_to_host(), d_s.copy_to_host()


def apply(y, positions, theta_hi, theta_lo, layout):
    """Host wrapper: rotate a float64 C-contiguous copy y [b, s, h, d]; returns the result."""
    _check_device()
    if y.size == 0:
        return y
    half = theta_hi.shape[0]
    d_y = cuda.to_device(np.ascontiguousarray(y, dtype=np.float64))
    _apply_jit[_blocks(y.shape[0] * y.shape[1] * half), THREADS_PER_BLOCK](
        d_y,
        cuda.to_device(np.ascontiguousarray(positions, dtype=np.int64)),
        cuda.to_device(np.ascontiguousarray(theta_hi, dtype=np.float64)),
        cuda.to_device(np.ascontiguousarray(theta_lo, dtype=np.float64)),
        np.int64(layout),
    )
    return d_y.copy_to_host()
