"""sinusoidal's row of `posref bench`'s families table (conformance/commands/bench_families.py): the
cpu reference, fast mode, against a numpy copy of its output's bytes; golden mode runs RoPE's vectorised quick phase, so the full table is timed.

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, and where golden mode differs, ``golden`` with ``fast_small`` on its smaller workload).
"""

from __future__ import annotations

import numpy as np

from reference import sinusoidal

WORKLOAD = "table 4096 positions x d_model 4096"
GOLDEN_WORKLOAD = None  # golden is timed on WORKLOAD


def cells(rng) -> dict:
    positions = np.arange(4096, dtype=np.int64)
    src = np.ones((4096, 4096))
    return {
        "copy": lambda: src.copy(),
        "fast": lambda: sinusoidal.table(positions, 4096),
        "golden": lambda: sinusoidal.table(positions, 4096, mode="golden"),
    }
