"""mpmath oracle of the learned lookup: the exact sums that certify the golden values.

Independent of the backends: rows by Python integer arithmetic (with its own length-wall check),
and each sum x + table[row] formed *exactly* (``mpmath.fadd(..., exact=True)``: the sum of two
doubles is a finite binary fraction). Converting an exact sum to float gives the correctly rounded
float64, so a stored value that equals it is certified as correctly rounded.
"""

from __future__ import annotations

import mpmath
import numpy as np


def row_of(position: int, num_positions: int, variant: str, padding_idx) -> int:
    """The row of one position (Python ints); ValueError outside the wall."""
    p = int(position)
    if variant == "absolute":
        row = p
    elif variant == "roberta":
        if p < -1:
            raise ValueError(f"positions: {p} is negative and not the padding marker -1 (length wall)")
        row = p + int(padding_idx) + 1
    else:
        raise ValueError(f"variant: unknown {variant!r}")
    if not 0 <= row < int(num_positions):
        raise ValueError(f"positions: {p} reads row {row}, outside the {num_positions}-row table (length wall)")
    return row


def lookup_exact(x, positions, table, variant="absolute", padding_idx=None) -> np.ndarray:
    """Object array [b, s, d] of mpmath.mpf: the exact x + table[row] (not rounded)."""
    x = np.asarray(x, dtype=np.float64)
    pos = np.asarray(positions)
    table = np.asarray(table, dtype=np.float64)
    b, s, d = x.shape
    out = np.empty((b, s, d), dtype=object)
    for i in range(b):
        for k in range(s):
            row = row_of(int(pos[i, k]), table.shape[0], variant, padding_idx)
            for j in range(d):
                out[i, k, j] = mpmath.fadd(mpmath.mpf(float(x[i, k, j])), mpmath.mpf(float(table[row, j])),
                                           exact=True)
    return out


def rounded(exact: np.ndarray) -> np.ndarray:
    """The float64 nearest to each exact value (mpmath rounds to nearest, ties to even)."""
    flat = [float(v) for v in np.asarray(exact, dtype=object).reshape(-1)]
    return np.array(flat, dtype=np.float64).reshape(np.shape(exact))
