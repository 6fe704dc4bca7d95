"""NoPE: the identity map on x (see __init__)."""

from __future__ import annotations

import numpy as np

from reference.numerics.validate import check_backend, check_mode, check_positions, check_x


def apply(x, positions, *, backend: str = "cpu", mode: str = "fast") -> np.ndarray:
    """x converted to float64, unchanged: no position enters. x [b, s, h, d], positions [b, s]
    (validated like RoPE's, so a NoPE layer accepts exactly what a RoPE layer does)."""
    x = check_x(x)
    check_positions(positions, x.shape[:2])
    backend, _ = check_backend(backend), check_mode(mode)
    if backend != "cuda":  # check_x's result is already a fresh float64 copy: the identity's output
        return x
    from . import cuda_kernels  # numba start-up: imported on first use

    return cuda_kernels.copy(x)
