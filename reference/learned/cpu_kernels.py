"""Numba @njit kernel of the learned lookup on the CPU (backend "cpu"). Never fastmath.

One compiled signature (contiguous float64 / int64 arrays, cached on disk). Each output element
is one float64 addition, x + table[row], so it is bit-identical to NumPy's and the CUDA kernel's.
The wall is checked by the caller (core.lookup); the kernel still never reads outside the table:
it counts rows outside [0, N) and leaves their outputs NaN, and the wrapper raises if it found any.
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
    out = np.full(x.shape, np.nan)
    outside = lookup_kernel(np.ascontiguousarray(x, dtype=np.float64),
                            np.ascontiguousarray(positions, dtype=np.int64),
                            np.ascontiguousarray(table, dtype=np.float64), np.int64(offset), out)
    if outside:
        raise ValueError(f"positions: {outside} rows outside the {table.shape[0]}-row table (length wall)")
    return out
