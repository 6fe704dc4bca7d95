"""The NumPy twin of the learned lookup (backend "numpy"): a gather and one vectorised addition.

Independent of the kernels: rows by integer arithmetic on the whole array, the table gathered by
fancy indexing, and NumPy's float64 add (one IEEE addition per element, as in the kernels).
Inputs are validated by core.lookup (rows inside [0, N)).
"""

import numpy as np


def lookup(x: np.ndarray, positions: np.ndarray, table: np.ndarray, offset: int) -> np.ndarray:
    """x [b, s, d] + table[positions + offset] -> float64 [b, s, d] (a new array)."""
    rows = positions.astype(np.int64) + np.int64(offset)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, overflow is inf: IEEE
        return np.add(x, table[rows], dtype=np.float64)
