"""Numba @njit kernels of the learned lookup and its backward on the CPU (backend "cpu"). Never
fastmath.

One compiled signature each (contiguous float64 / int64 arrays, cached on disk).
- lookup: each output element is one float64 addition, x + table[row], so it is bit-identical to
  NumPy's and the CUDA kernel's.
- scatter_add (backward.lookup_vjp): each table element starts from 0.0 and adds the g of the
  tokens reading its row in token order, one IEEE addition each: numpy.add.at's recursive
  summation, so it is bit-identical to the NumPy twin and the CUDA kernel.
The wall is checked by the callers (core.lookup, backward.rows_of); the kernels still never touch
a row outside the table: they count rows outside [0, N) and skip them, and the wrappers raise if
they found any.
"""

import numba
import numpy as np


@numba.njit(cache=True, fastmath=False)
def lookup_kernel(x, positions, table, offset, out):
    """out[b, s, j] = x[b, s, j] + table[positions[b, s] + offset, j]; returns the number of tokens
    whose row is outside the table (their outputs are left as they were)."""
    nb, ns, d = x.shape
    n_rows = table.shape[0]
    outside = 0
    for b in range(nb):
        for s in range(ns):
            row = positions[b, s] + offset
            if row < 0 or row >= n_rows:
                outside += 1
                continue
            for j in range(d):
                out[b, s, j] = x[b, s, j] + table[row, j]
    return outside


def lookup(x: np.ndarray, positions: np.ndarray, table: np.ndarray, offset: int) -> np.ndarray:
    """Host wrapper: float64 [b, s, d] from validated contiguous inputs."""
    out = np.empty(x.shape)  # every entry written, or the call raises below
    outside = lookup_kernel(np.ascontiguousarray(x, dtype=np.float64),
                            np.ascontiguousarray(positions, dtype=np.int64),
                            np.ascontiguousarray(table, dtype=np.float64), np.int64(offset), out)
    if outside:
        raise ValueError(f"positions: {outside} rows outside the {table.shape[0]}-row table (length wall)")
    return out


@numba.njit(cache=True, fastmath=False)
def scatter_add_kernel(g, rows, out):
    """out[rows[t], j] += g[t, j] for the tokens t in order (out starts at 0); returns the number of
    tokens whose row is outside the table (skipped)."""
    n_rows, d = out.shape
    outside = 0
    for t in range(g.shape[0]):
        row = rows[t]
        if row < 0 or row >= n_rows:
            outside += 1
            continue
        for j in range(d):
            out[row, j] += g[t, j]
    return outside


def scatter_add(g: np.ndarray, rows: np.ndarray, num_positions: int) -> np.ndarray:
    """Host wrapper: float64 [num_positions, d] from g [tokens, d] and rows int64 [tokens]."""
    out = np.zeros((num_positions, g.shape[1]))
    outside = scatter_add_kernel(np.ascontiguousarray(g, dtype=np.float64),
                                 np.ascontiguousarray(rows, dtype=np.int64), out)
    if outside:
        raise ValueError(f"positions: {outside} rows outside the {num_positions}-row table (length wall)")
    return out
