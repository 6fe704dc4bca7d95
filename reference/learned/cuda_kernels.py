"""numba.cuda kernel of the learned lookup (backend "cuda"). Never fastmath.

Runs on a real GPU where one exists and under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set
before numba.cuda is first imported) elsewhere. One thread per output element (grid-stride):
out = x + table[row], a single ``add.rn.f64`` with no product that NVVM could contract into an
FMA, so the result is bit-identical to the CPU kernel's and NumPy's. A row outside the table is
never read (the caller refuses such positions first; the kernel skips them, leaving NaN).

``PTX_SIGNATURES`` lists every kernel with the exact signature the host wrapper launches it at,
so tests can compile each one to PTX for sm_80 and sm_90 with numba.cuda.compile_ptx.
"""

import numpy as np
from numba import cuda, float64, int64

THREADS_PER_BLOCK = 128
_MAX_BLOCKS = 65535


def lookup_kernel(x, positions, table, offset, out):
    """out[b, s, j] = x[b, s, j] + table[positions[b, s] + offset, j] (grid-stride, 1-D)."""
    nb, ns, d = x.shape[0], x.shape[1], x.shape[2]
    n_rows = table.shape[0]
    total = nb * ns * d
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, total, stride):
        tok = k // d
        j = k - tok * d
        bi = tok // ns
        si = tok - bi * ns
        row = positions[bi, si] + offset
        if row >= 0 and row < n_rows:
            out[bi, si, j] = x[bi, si, j] + table[row, j]


_SIG_LOOKUP = (float64[:, :, ::1], int64[:, ::1], float64[:, ::1], int64, float64[:, :, ::1])

# (Python function, argument types) of every kernel, as launched by the wrapper below.
PTX_SIGNATURES = [(lookup_kernel, _SIG_LOOKUP)]

_lookup_jit = cuda.jit(lookup_kernel)


def _check_device():
    if not cuda.is_available():
        raise ValueError(
            "backend: 'cuda' needs a CUDA GPU, or NUMBA_ENABLE_CUDASIM=1 set before numba.cuda "
            "is imported"
        )


def _blocks(total):
    return max(1, min(_MAX_BLOCKS, (total + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK))


def lookup(x: np.ndarray, positions: np.ndarray, table: np.ndarray, offset: int) -> np.ndarray:
    """Host wrapper: float64 [b, s, d] from validated contiguous inputs."""
    _check_device()
    if x.size == 0:
        return np.empty(x.shape)
    rows = positions.astype(np.int64) + np.int64(offset)
    if rows.size and (rows.min() < 0 or rows.max() >= table.shape[0]):
        raise ValueError(f"positions: rows outside the {table.shape[0]}-row table (length wall)")
    d_out = cuda.to_device(np.full(x.shape, np.nan))
    _lookup_jit[_blocks(x.size), THREADS_PER_BLOCK](
        cuda.to_device(np.ascontiguousarray(x, dtype=np.float64)),
        cuda.to_device(np.ascontiguousarray(positions, dtype=np.int64)),
        cuda.to_device(np.ascontiguousarray(table, dtype=np.float64)),
        np.int64(offset),
        d_out,
    )
    return d_out.copy_to_host()
