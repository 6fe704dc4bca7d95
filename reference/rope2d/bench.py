"""Axial 2-D RoPE's row of `posref bench`'s families table (conformance/commands/bench_families.py): the
cpu reference, fast mode, against a numpy copy of its output's bytes; golden mode (mpmath per value) on a small workload.

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, and where golden mode differs, ``golden`` with ``fast_small`` on its smaller workload).
"""

from __future__ import annotations

import numpy as np

import math

from reference import rope2d

WORKLOAD = "apply [1, 4096, 32, 128], 64 x 64 grid"
GOLDEN_WORKLOAD = "apply [1, 4, 4, 128]"


def grid(seq: int) -> np.ndarray:
    """[1, seq, 2]: the (column, row) of each token of a side x side grid, side = isqrt(seq)."""
    side = int(math.isqrt(seq))
    t = np.arange(seq, dtype=np.int64)
    return np.stack([t % side, t // side], axis=-1)[None]


def cells(rng) -> dict:
    x = rng.standard_normal((1, 4096, 32, 128))
    small = rng.standard_normal((1, 4, 4, 128))
    coords, scoords = grid(4096), grid(4)
    return {
        "copy": lambda: x.copy(),
        "fast": lambda: rope2d.apply(x, coords),
        "fast_small": lambda: rope2d.apply(small, scoords),
        "golden": lambda: rope2d.apply(small, scoords, mode="golden"),
    }
