"""numba.cuda kernels of the learned lookup and its backward (backend "cuda"). Never fastmath.

Runs on a real GPU where one exists and under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set
before numba.cuda is first imported) elsewhere. One thread per output element (grid-stride):
- lookup: out = x + table[row], a single ``add.rn.f64`` with no product that NVVM could contract
  into an FMA, so the result is bit-identical to the CPU kernel's and NumPy's;
- scatter_add (backward.lookup_vjp): the thread of table element (r, j) starts from 0.0 and adds
  g[t, j] for the tokens t reading row r, in token order (the host groups the tokens by row with
  a stable sort, so each thread visits only its row's tokens). No atomics: the order is fixed, so
  the sum is deterministic and, with additions only, bit-identical to numpy.add.at and the CPU
  kernel (the same recursive summation).
A row outside the table is never touched (the callers refuse such positions first; the wrappers
check again).

``PTX_SIGNATURES`` lists every kernel with the exact signature the host wrapper launches it at,
so tests can compile each one to PTX for sm_80 and sm_90 with numba.cuda.compile_ptx.
"""

import numpy as np
from numba import cuda, float64, int64

from reference.numerics.cuda_launch import THREADS_PER_BLOCK, blocks, check_device, to_device


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


def scatter_add_kernel(g, order, starts, out):
    """out[r, j] = sum of g[order[p], j] for p in starts[r]..starts[r + 1] - 1, left to right
    (grid-stride over the table's elements, one thread each)."""
    n_rows, d = out.shape[0], out.shape[1]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, n_rows * d, stride):
        r = k // d
        j = k - r * d
        acc = 0.0
        for p in range(starts[r], starts[r + 1]):
            acc += g[order[p], j]
        out[r, j] = acc


_SIG_LOOKUP = (float64[:, :, ::1], int64[:, ::1], float64[:, ::1], int64, float64[:, :, ::1])
_SIG_SCATTER_ADD = (float64[:, ::1], int64[::1], int64[::1], float64[:, ::1])

# (Python function, argument types) of every kernel, as launched by the wrappers below.
PTX_SIGNATURES = [(lookup_kernel, _SIG_LOOKUP), (scatter_add_kernel, _SIG_SCATTER_ADD)]

_lookup_jit = cuda.jit(lookup_kernel)
_scatter_add_jit = cuda.jit(scatter_add_kernel)


def _check_rows(rows: np.ndarray, n_rows: int):
    if rows.size and (rows.min() < 0 or rows.max() >= n_rows):
        raise ValueError(f"positions: rows outside the {n_rows}-row table (length wall)")


def lookup(x: np.ndarray, positions: np.ndarray, table: np.ndarray, offset: int) -> np.ndarray:
    """Host wrapper: float64 [b, s, d] from validated contiguous inputs."""
    check_device()
    if x.size == 0:
        return np.empty(x.shape)
    _check_rows(positions.astype(np.int64) + np.int64(offset), table.shape[0])
    d_out = cuda.to_device(np.full(x.shape, np.nan))
    _lookup_jit[blocks(x.size), THREADS_PER_BLOCK](
        to_device(x, np.float64),
        to_device(positions, np.int64),
        to_device(table, np.float64),
        np.int64(offset),
        d_out,
    )
    return d_out.copy_to_host()


def scatter_add(g: np.ndarray, rows: np.ndarray, num_positions: int) -> np.ndarray:
    """Host wrapper: float64 [num_positions, d] from g [tokens, d] and rows int64 [tokens]."""
    check_device()
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    _check_rows(rows, num_positions)
    if g.size == 0:  # no token, or no column: nothing to add, nothing to launch
        return np.zeros((num_positions, g.shape[1]))
    # CSR by row: a stable sort keeps each row's tokens in token order (the order of the sum)
    order = np.argsort(rows, kind="stable").astype(np.int64)
    starts = np.zeros(num_positions + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=num_positions), out=starts[1:])
    d_out = cuda.device_array((num_positions, g.shape[1]), dtype=np.float64)
    _scatter_add_jit[blocks(d_out.size), THREADS_PER_BLOCK](
        to_device(g, np.float64), cuda.to_device(order),
        cuda.to_device(starts), d_out,
    )
    return d_out.copy_to_host()
