"""Numba @njit kernels for RoPE on the CPU (backend "cpu"). Never fastmath.

Each kernel takes contiguous float64/int64 arrays only, so it compiles for one signature
(cached on disk: cache=True, keyed also on ddmath.py's source digest).
The angle math is ddmath.py compiled with numba.njit; see its docstring for the algorithm.
``apply`` works on a float64 copy of x made by the caller: pairs are overwritten in place and
the tail past rotary_dim is never touched, so it stays bit-identical.
"""

import hashlib
import pathlib

import numba
import numpy as np
from numba import prange

from . import ddmath


@numba.njit(inline="always", fastmath=False)
def _mul(a, b):
    return a * b


dd = ddmath.jit_family(numba.njit(fastmath=False), _mul)
_sincos_angle = dd.sincos_angle
_rotate = dd.rotate


def _build(ddmath_digest):
    """Define the kernels as closures over ddmath.py's source digest.

    Numba's on-disk cache keys an entry on the kernel's own bytecode, its closure values and
    the mtime of *this* file only; without the digest, an edit to ddmath.py would silently
    load stale machine code.
    """

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def cos_sin_kernel(positions, theta_hi, theta_lo, cos_out, sin_out):
        """cos_out[t, i], sin_out[t, i] = cos, sin of positions[t] * theta_i.

        positions int64[::1] (n), theta_hi/theta_lo float64[::1] (r/2), outputs float64[:, ::1].
        """
        _digest = ddmath_digest  # noqa: F841  (see _build)
        half = theta_hi.shape[0]
        for t in prange(positions.shape[0]):
            m = np.float64(positions[t])
            for i in range(half):
                s, c = _sincos_angle(m, theta_hi[i], theta_lo[i])
                cos_out[t, i] = c
                sin_out[t, i] = s

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def apply_kernel(y, positions, theta_hi, theta_lo, layout):
        """Rotate the pairs of y [b, s, h, d] in place; layout 0 = half, 1 = interleaved.

        y float64[:, :, :, ::1] C-contiguous, positions int64[:, ::1] [b, s].
        """
        _digest = ddmath_digest  # noqa: F841  (see _build)
        nb, ns, nh, _ = y.shape
        half = theta_hi.shape[0]
        # one token per prange step: its r/2 cos/sin values are computed once for all heads
        for bs in prange(nb * ns):
            bi = bs // ns
            si = bs % ns
            m = np.float64(positions[bi, si])
            cs = np.empty(half)
            sn = np.empty(half)
            for i in range(half):
                s, c = _sincos_angle(m, theta_hi[i], theta_lo[i])
                cs[i] = c
                sn[i] = s
            for h in range(nh):
                for i in range(half):
                    if layout == 0:
                        j0 = i
                        j1 = i + half
                    else:
                        j0 = 2 * i
                        j1 = 2 * i + 1
                    a = y[bi, si, h, j0]
                    b = y[bi, si, h, j1]
                    o0, o1 = _rotate(a, b, cs[i], sn[i])
                    y[bi, si, h, j0] = o0
                    y[bi, si, h, j1] = o1

    return cos_sin_kernel, apply_kernel


cos_sin_kernel, apply_kernel = _build(
    hashlib.sha256(pathlib.Path(ddmath.__file__).read_bytes()).hexdigest()
)


def cos_sin(positions, theta_hi, theta_lo):
    """Host wrapper: positions int64 [n] -> (cos, sin) float64 [n, r/2]."""
    n = positions.shape[0]
    half = theta_hi.shape[0]
    c = np.empty((n, half), dtype=np.float64)
    s = np.empty((n, half), dtype=np.float64)
    cos_sin_kernel(
        np.ascontiguousarray(positions, dtype=np.int64),
        np.ascontiguousarray(theta_hi, dtype=np.float64),
        np.ascontiguousarray(theta_lo, dtype=np.float64),
        c,
        s,
    )
    return c, s


def apply(y, positions, theta_hi, theta_lo, layout):
    """Host wrapper: rotate y (float64 C-contiguous [b, s, h, d]) in place; returns y."""
    if y.size == 0:
        return y
    apply_kernel(
        y,
        np.ascontiguousarray(positions, dtype=np.int64),
        np.ascontiguousarray(theta_hi, dtype=np.float64),
        np.ascontiguousarray(theta_lo, dtype=np.float64),
        np.int64(layout),
    )
    return y
