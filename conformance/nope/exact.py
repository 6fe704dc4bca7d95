"""NoPE's exact comparison, on arrays: nope.apply returns x unchanged, and its backward returns the
cotangent unchanged, so both grade which elements changed (any change is over budget)."""

from __future__ import annotations

import numpy as np


def changed(out, x) -> np.ndarray:
    """bool like x: the elements that differ from the input (a NaN matches a NaN)."""
    return ~((out == x) | (np.isnan(out) & np.isnan(x)))
