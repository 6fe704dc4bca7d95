"""Axial 2-D RoPE's row of `posref bench`'s families table (conformance/commands/bench_families.py): the
cpu reference, fast mode, against a numpy copy of its output's bytes; golden mode (the certified quick phase,
phase.py) on the same workload as fast mode (issue 31).

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, ``golden``; golden runs on the fast workload, so there is no ``fast_small``).
"""

from __future__ import annotations

import numpy as np

import math

from reference import rope2d

WORKLOAD = "apply [1, 4096, 32, 128], 64 x 64 grid"
GOLDEN_WORKLOAD = None  # golden is timed on WORKLOAD, next to fast


def grid(seq: int) -> np.ndarray:
    """[1, seq, 2]: the (column, row) of each token of a side x side grid, side = isqrt(seq)."""
    side = int(math.isqrt(seq))
    t = np.arange(seq, dtype=np.int64)
    return np.stack([t % side, t // side], axis=-1)[None]


def cells(rng) -> dict:
    x = rng.standard_normal((1, 4096, 32, 128))
    coords = grid(4096)
    return {
        "copy": lambda: x.copy(),
        "fast": lambda: rope2d.apply(x, coords),
        "golden": lambda: rope2d.apply(x, coords, mode="golden"),
    }
