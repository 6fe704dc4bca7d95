"""numba.cuda kernels for the phase m * theta (backend "cuda"). Never fastmath.

Runs on a real GPU where one exists and under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set
before numba.cuda is first imported) elsewhere. The angle math is ddmath.py compiled as device
functions with every floating-point product bound to ``libdevice.dmul_rn``, which NVVM never
contracts into an FMA (its default FMA contraction would break Dekker's error-free products).
The reduction is integer arithmetic on uint64 (exact, nothing to contract). Fast-mode sin/cos
are libdevice's (documented max error 2 ulp on the hi word before the lo-word correction);
golden mode uses no libdevice math at all, only ddmath's double-double series.

``PTX_SIGNATURES`` lists every kernel with the exact signature the host wrappers launch it at,
so tests can compile each one to PTX for sm_80 and sm_90 with numba.cuda.compile_ptx.
"""

import numpy as np
from numba import config, cuda, float64, int64, uint8, uint64
from numba.cuda import libdevice

from . import ddmath
from .cpu_kernels import pair_columns
from .cuda_launch import THREADS_PER_BLOCK, blocks, check_device, to_device

# The simulator runs kernels as Python, where libdevice stubs have no body: plain products
# there, FMA-proof dmul_rn on the device.
_mul = ddmath.mul if config.ENABLE_CUDASIM else libdevice.dmul_rn
dd = ddmath.jit_family(cuda.jit(device=True), _mul)
_sincos_fast = dd.sincos_fast
_sincos_golden = dd.sincos_golden
_round_sincos = dd.round_sincos
_rotate = dd.rotate
_rotate_golden = dd.rotate_golden
_MAX_LIMBS = ddmath.MAX_LIMBS
_pair_columns = cuda.jit(device=True)(pair_columns)


@cuda.jit(device=True)
def _token_pair(k, half, ns, layout):
    """(bi, si, i, j0, j1) of work item k of an apply kernel (one per (token, pair)): batch row,
    token of the row, pair, and the pair's two columns (cpu_kernels.pair_columns)."""
    tok = k // half
    i = k - tok * half
    bi = tok // ns
    si = tok - bi * ns
    j0, j1 = _pair_columns(i, half, layout)
    return bi, si, i, j0, j1


def cos_sin_fast_kernel(positions, limbs, cos_out, sin_out):
    """cos_out[t, i], sin_out[t, i] = cos, sin of positions[t] * theta_i (grid-stride, 1-D)."""
    count = limbs.shape[0]
    total = positions.shape[0] * count
    scratch = cuda.local.array(_MAX_LIMBS, uint64)
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, total, stride):
        t = k // count
        i = k - t * count
        s, c = _sincos_fast(positions[t], limbs, i, scratch)
        cos_out[t, i] = c
        sin_out[t, i] = s


def cos_sin_golden_kernel(positions, limbs, cos_out, sin_out, flags):
    """Golden cos/sin (each rounded once); flags bit 0 (cos) / 1 (sin) where not certain."""
    count = limbs.shape[0]
    total = positions.shape[0] * count
    scratch = cuda.local.array(_MAX_LIMBS, uint64)
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, total, stride):
        t = k // count
        i = k - t * count
        sh, sl, ch, cl, exact = _sincos_golden(positions[t], limbs, i, scratch)
        s, c, flag = _round_sincos(sh, sl, ch, cl, exact)
        cos_out[t, i] = c
        sin_out[t, i] = s
        flags[t, i] = flag


def apply_fast_kernel(y, positions, limbs, layout):
    """Rotate the pairs of y [b, s, h, d] in place; one thread per (token, pair), all heads.

    layout 0 = half (i, i + r/2), 1 = interleaved (2i, 2i + 1). The tail is never touched.
    """
    nb, ns, nh = y.shape[0], y.shape[1], y.shape[2]
    half = limbs.shape[0]
    total = nb * ns * half
    scratch = cuda.local.array(_MAX_LIMBS, uint64)
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, total, stride):
        bi, si, i, j0, j1 = _token_pair(k, half, ns, layout)
        s, c = _sincos_fast(positions[bi, si], limbs, i, scratch)
        for h in range(nh):
            o0, o1 = _rotate(y[bi, si, h, j0], y[bi, si, h, j1], c, s)
            y[bi, si, h, j0] = o0
            y[bi, si, h, j1] = o1


def apply_golden_kernel(y, positions, limbs, layout, flags):
    """Golden rotation in place (each output rounded once from a double-double); flags
    [b, s, h, r/2] = 1 where the pair needs the exact host path."""
    nb, ns, nh = y.shape[0], y.shape[1], y.shape[2]
    half = limbs.shape[0]
    total = nb * ns * half
    scratch = cuda.local.array(_MAX_LIMBS, uint64)
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, total, stride):
        bi, si, i, j0, j1 = _token_pair(k, half, ns, layout)
        sh, sl, ch, cl, _ = _sincos_golden(positions[bi, si], limbs, i, scratch)
        for h in range(nh):
            o0, o1, ok = _rotate_golden(y[bi, si, h, j0], y[bi, si, h, j1], sh, sl, ch, cl)
            y[bi, si, h, j0] = o0
            y[bi, si, h, j1] = o1
            flags[bi, si, h, i] = 0 if ok else 1


_LIMBS = uint64[:, ::1]
_SIG_COS_SIN_FAST = (int64[::1], _LIMBS, float64[:, ::1], float64[:, ::1])
_SIG_COS_SIN_GOLDEN = _SIG_COS_SIN_FAST + (uint8[:, ::1],)
_SIG_APPLY_FAST = (float64[:, :, :, ::1], int64[:, ::1], _LIMBS, int64)
_SIG_APPLY_GOLDEN = _SIG_APPLY_FAST + (uint8[:, :, :, ::1],)

# (Python function, argument types) of every kernel, as launched by the wrappers below.
PTX_SIGNATURES = [
    (cos_sin_fast_kernel, _SIG_COS_SIN_FAST),
    (cos_sin_golden_kernel, _SIG_COS_SIN_GOLDEN),
    (apply_fast_kernel, _SIG_APPLY_FAST),
    (apply_golden_kernel, _SIG_APPLY_GOLDEN),
]
# Kernels whose only FMAs may be those inside libdevice's sin and cos (fast mode); golden
# kernels call no libdevice math, so their PTX must contain no FMA at all.
USES_LIBDEVICE_SINCOS = {"cos_sin_fast_kernel", "apply_fast_kernel"}

_cos_sin_fast_jit = cuda.jit(cos_sin_fast_kernel)
_cos_sin_golden_jit = cuda.jit(cos_sin_golden_kernel)
_apply_fast_jit = cuda.jit(apply_fast_kernel)
_apply_golden_jit = cuda.jit(apply_golden_kernel)


def _cos_sin(kernel, positions, limbs, golden):
    check_device()
    n, count = positions.shape[0], limbs.shape[0]
    if n == 0:
        empty = np.empty((0, count))
        return (empty, empty.copy(), np.zeros((0, count), np.uint8)) if golden else (empty, empty.copy())
    d_c = cuda.device_array((n, count), dtype=np.float64)
    d_s = cuda.device_array((n, count), dtype=np.float64)
    args = [to_device(positions, np.int64), to_device(limbs, np.uint64), d_c, d_s]
    if golden:
        d_f = cuda.device_array((n, count), dtype=np.uint8)
        args.append(d_f)
    kernel[blocks(n * count), THREADS_PER_BLOCK](*args)
    if golden:
        return d_c.copy_to_host(), d_s.copy_to_host(), d_f.copy_to_host()
    return d_c.copy_to_host(), d_s.copy_to_host()


def cos_sin_fast(positions, limbs):
    """Host wrapper: positions int64 [n] -> (cos, sin) float64 [n, count]."""
    return _cos_sin(_cos_sin_fast_jit, positions, limbs, False)


def cos_sin_golden(positions, limbs):
    """Host wrapper: positions int64 [n] -> (cos, sin, flags) [n, count] (golden mode)."""
    return _cos_sin(_cos_sin_golden_jit, positions, limbs, True)


def apply_fast(y, positions, limbs, layout):
    """Host wrapper: rotate a float64 C-contiguous copy y [b, s, h, d]; returns the result."""
    check_device()
    if y.size == 0:
        return y
    d_y = to_device(y, np.float64)
    _apply_fast_jit[blocks(y.shape[0] * y.shape[1] * limbs.shape[0]), THREADS_PER_BLOCK](
        d_y, to_device(positions, np.int64), to_device(limbs, np.uint64), np.int64(layout)
    )
    return d_y.copy_to_host()


def apply_golden(y, positions, limbs, layout):
    """Host wrapper: golden rotation of y; returns (result, flags [b, s, h, count])."""
    check_device()
    nb, ns, nh, _ = y.shape
    count = limbs.shape[0]
    if y.size == 0:
        return y, np.zeros((nb, ns, nh, count), dtype=np.uint8)
    d_y = to_device(y, np.float64)
    d_f = cuda.to_device(np.zeros((nb, ns, nh, count), dtype=np.uint8))
    _apply_golden_jit[blocks(nb * ns * count), THREADS_PER_BLOCK](
        d_y, to_device(positions, np.int64), to_device(limbs, np.uint64), np.int64(layout), d_f
    )
    return d_y.copy_to_host(), d_f.copy_to_host()
