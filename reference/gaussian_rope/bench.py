"""Gaussian-kernel RoPE's row of `posref bench`'s families table (conformance/commands/bench_families.py): the
cpu reference, fast mode, against a numpy copy of its output's bytes; golden mode (the certified quick phase,
phase.py) on the same workload as fast mode (issue 31).

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, ``golden``; golden runs on the fast workload, so there is no ``fast_small``).
"""

from __future__ import annotations

import numpy as np

from reference import gaussian_rope

WORKLOAD = "apply [1, 4096, 32, 128]"
GOLDEN_WORKLOAD = None  # golden is timed on WORKLOAD, next to fast


def cells(rng) -> dict:
    x = rng.standard_normal((1, 4096, 32, 128))
    pos = np.arange(4096, dtype=np.int64)[None, :]
    kernel = gaussian_rope.DOCUMENT_KERNEL
    return {
        "copy": lambda: x.copy(),
        "fast": lambda: gaussian_rope.apply(x, pos, kernel=kernel),
        "golden": lambda: gaussian_rope.apply(x, pos, kernel=kernel, mode="golden"),
    }
