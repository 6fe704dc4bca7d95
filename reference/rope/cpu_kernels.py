"""Numba @njit kernels for the phase m * theta on the CPU (backend "cpu"). Never fastmath.

Each kernel takes contiguous int64/uint64/float64 arrays only, so it compiles for one signature
(cached on disk: cache=True, keyed also on ddmath.py's source digest). The angle math is
ddmath.py compiled with numba.njit; see its docstring for the algorithm. ``limbs`` is a
FrequencyTable's uint64 [n, 1 + F] fixed-point 2 theta / pi (phase.py).

The apply kernels work on a float64 copy of x made by the caller: pairs are overwritten in place
and the tail past rotary_dim is never touched, so it stays bit-identical.
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


# Functions with array arguments are inlined at the Numba IR level (see ddmath.ARRAY_FUNCTIONS):
# that roughly halves the cost of the fast path.
dd = ddmath.jit_family(
    numba.njit(fastmath=False), _mul, array_decorator=numba.njit(fastmath=False, inline="always")
)
_sincos_fast = dd.sincos_fast
_rotate = dd.rotate
_sincos_golden = dd.sincos_golden
_round_sincos = dd.round_sincos
_rotate_golden = dd.rotate_golden
_MAX_LIMBS = ddmath.MAX_LIMBS


def _build(ddmath_digest):
    """Define the kernels as closures over ddmath.py's source digest.

    Numba's on-disk cache keys an entry on the kernel's own bytecode, its closure values and
    the mtime of *this* file only; without the digest, an edit to ddmath.py would silently
    load stale machine code.
    """

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def cos_sin_fast_kernel(positions, limbs, cos_out, sin_out):
        """cos_out[t, i], sin_out[t, i] = cos, sin of positions[t] * theta_i (fast mode).

        positions int64[::1] (n), limbs uint64[:, ::1] (count, 1 + F), outputs float64[:, ::1].
        """
        _digest = ddmath_digest  # noqa: F841  (see _build)
        count = limbs.shape[0]
        for t in prange(positions.shape[0]):
            scratch = np.empty(_MAX_LIMBS, dtype=np.uint64)
            m = positions[t]
            for i in range(count):
                s, c = _sincos_fast(m, limbs, i, scratch)
                cos_out[t, i] = c
                sin_out[t, i] = s

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def cos_sin_golden_kernel(positions, limbs, cos_out, sin_out, flags):
        """As cos_sin_fast_kernel, each value rounded once from a double-double (golden mode).

        flags uint8[:, ::1]: bit 0 (cos) / bit 1 (sin) set where the rounding is not certain.
        """
        _digest = ddmath_digest  # noqa: F841  (see _build)
        count = limbs.shape[0]
        for t in prange(positions.shape[0]):
            scratch = np.empty(_MAX_LIMBS, dtype=np.uint64)
            m = positions[t]
            for i in range(count):
                sh, sl, ch, cl, exact = _sincos_golden(m, limbs, i, scratch)
                s, c, flag = _round_sincos(sh, sl, ch, cl, exact)
                cos_out[t, i] = c
                sin_out[t, i] = s
                flags[t, i] = flag

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def apply_fast_kernel(y, positions, limbs, layout):
        """Rotate the pairs of y [b, s, h, d] in place; layout 0 = half, 1 = interleaved.

        y float64[:, :, :, ::1] C-contiguous, positions int64[:, ::1] [b, s].
        """
        _digest = ddmath_digest  # noqa: F841  (see _build)
        nb, ns, nh, _ = y.shape
        half = limbs.shape[0]
        # one token per prange step: its r/2 cos/sin values are computed once for all heads
        for bs in prange(nb * ns):
            bi = bs // ns
            si = bs % ns
            m = positions[bi, si]
            scratch = np.empty(_MAX_LIMBS, dtype=np.uint64)
            cs = np.empty(half)
            sn = np.empty(half)
            for i in range(half):
                s, c = _sincos_fast(m, limbs, i, scratch)
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
                    o0, o1 = _rotate(y[bi, si, h, j0], y[bi, si, h, j1], cs[i], sn[i])
                    y[bi, si, h, j0] = o0
                    y[bi, si, h, j1] = o1

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def apply_golden_kernel(y, positions, limbs, layout, flags):
        """Golden apply in place: each output the double-double a c - b s (a s + b c) rounded
        once. flags uint8[:, :, :, ::1] [b, s, h, r/2]: 1 where the pair needs the exact path."""
        _digest = ddmath_digest  # noqa: F841  (see _build)
        nb, ns, nh, _ = y.shape
        half = limbs.shape[0]
        for bs in prange(nb * ns):
            bi = bs // ns
            si = bs % ns
            m = positions[bi, si]
            scratch = np.empty(_MAX_LIMBS, dtype=np.uint64)
            tab = np.empty((4, half))
            for i in range(half):
                sh, sl, ch, cl, _ = _sincos_golden(m, limbs, i, scratch)
                tab[0, i] = sh
                tab[1, i] = sl
                tab[2, i] = ch
                tab[3, i] = cl
            for h in range(nh):
                for i in range(half):
                    if layout == 0:
                        j0 = i
                        j1 = i + half
                    else:
                        j0 = 2 * i
                        j1 = 2 * i + 1
                    o0, o1, ok = _rotate_golden(
                        y[bi, si, h, j0], y[bi, si, h, j1], tab[0, i], tab[1, i], tab[2, i], tab[3, i]
                    )
                    y[bi, si, h, j0] = o0
                    y[bi, si, h, j1] = o1
                    flags[bi, si, h, i] = 0 if ok else 1

    return cos_sin_fast_kernel, cos_sin_golden_kernel, apply_fast_kernel, apply_golden_kernel


cos_sin_fast_kernel, cos_sin_golden_kernel, apply_fast_kernel, apply_golden_kernel = _build(
    hashlib.sha256(pathlib.Path(ddmath.__file__).read_bytes()).hexdigest()
)
KERNELS = (cos_sin_fast_kernel, cos_sin_golden_kernel, apply_fast_kernel, apply_golden_kernel)


def _pos(positions):
    return np.ascontiguousarray(positions, dtype=np.int64)


def _limbs(limbs):
    return np.ascontiguousarray(limbs, dtype=np.uint64)


def cos_sin_fast(positions, limbs):
    """Host wrapper: positions int64 [n] -> (cos, sin) float64 [n, count]."""
    n, count = positions.shape[0], limbs.shape[0]
    c = np.empty((n, count), dtype=np.float64)
    s = np.empty((n, count), dtype=np.float64)
    cos_sin_fast_kernel(_pos(positions), _limbs(limbs), c, s)
    return c, s


def cos_sin_golden(positions, limbs):
    """Host wrapper: positions int64 [n] -> (cos, sin, flags) [n, count] (golden mode)."""
    n, count = positions.shape[0], limbs.shape[0]
    c = np.empty((n, count), dtype=np.float64)
    s = np.empty((n, count), dtype=np.float64)
    flags = np.zeros((n, count), dtype=np.uint8)
    cos_sin_golden_kernel(_pos(positions), _limbs(limbs), c, s, flags)
    return c, s, flags


def apply_fast(y, positions, limbs, layout):
    """Host wrapper: rotate y (float64 C-contiguous [b, s, h, d]) in place; returns y."""
    if y.size == 0:
        return y
    apply_fast_kernel(y, _pos(positions), _limbs(limbs), np.int64(layout))
    return y


def apply_golden(y, positions, limbs, layout):
    """Host wrapper: golden rotation of y in place; returns (y, flags [b, s, h, count])."""
    nb, ns, nh, _ = y.shape
    flags = np.zeros((nb, ns, nh, limbs.shape[0]), dtype=np.uint8)
    if y.size == 0:
        return y, flags
    apply_golden_kernel(y, _pos(positions), _limbs(limbs), np.int64(layout), flags)
    return y, flags
