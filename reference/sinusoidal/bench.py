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
# Why a target of issue 31 is not met on the 2-core VM (posref bench prints it beside the figure).
UNMET = {
    "fast": ("every value is an accurately reduced cos or sin (compute per value, not a copy): one pass "
             "since issue 31, writing the table's columns directly"),
}


def cells(rng) -> dict:
    positions = np.arange(4096, dtype=np.int64)
    src = np.ones((4096, 4096))
    return {
        "copy": lambda: src.copy(),
        "fast": lambda: sinusoidal.table(positions, 4096),
        "golden": lambda: sinusoidal.table(positions, 4096, mode="golden"),
    }
