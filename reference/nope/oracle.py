"""mpmath oracle for NoPE: the exact output is the input itself (each double as an exact mpf)."""

import mpmath
import numpy as np


def apply_exact(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.array([mpmath.mpf(float(v)) for v in x.reshape(-1)], dtype=object).reshape(x.shape)
