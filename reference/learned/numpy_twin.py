"""The NumPy twin of the learned lookup (backend "numpy"): a gather and one vectorised addition,
and the backward's scatter-add.

Independent of the kernels: rows by integer arithmetic on the whole array, the table gathered by
fancy indexing, and NumPy's float64 add (one IEEE addition per element, as in the kernels).
Inputs are validated by core.lookup (rows inside [0, N)); the scatter-add's rows by
backward.rows_of.
"""

import numpy as np


def lookup(x: np.ndarray, positions: np.ndarray, table: np.ndarray, offset: int) -> np.ndarray:
    """x [b, s, d] + table[positions + offset] -> float64 [b, s, d] (a new array)."""
    rows = positions.astype(np.int64) + np.int64(offset)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, overflow is inf: IEEE
        return np.add(x, table[rows], dtype=np.float64)


def scatter_add(g: np.ndarray, rows: np.ndarray, num_positions: int) -> np.ndarray:
    """out[r, :] = sum over the tokens t with rows[t] = r of g[t, :], float64 [num_positions, d].

    g [tokens, d] float64, rows int64 [tokens] inside [0, num_positions). ``numpy.add.at`` starts
    from 0 and adds the tokens in order, one IEEE addition each (recursive summation): the order
    the cpu and cuda kernels reproduce.
    """
    out = np.zeros((num_positions, g.shape[1]))
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, overflow is inf: IEEE
        np.add.at(out, rows, g)
    return out
