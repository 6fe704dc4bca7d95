"""KERPLE's row of `posref bench`'s families table (conformance/commands/bench_families.py): the cpu
reference, fast mode, against a numpy copy of its output's bytes; golden mode (a double-double
quick phase per head and distance, reference/numerics/bias/kerple_golden.py) on the same workload.

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, and where golden mode differs, ``golden`` with ``fast_small`` on its smaller workload).
"""

from __future__ import annotations

import numpy as np

from reference import kerple

WORKLOAD = "bias log [4, 4096, 4096]"
GOLDEN_WORKLOAD = None  # golden is timed on WORKLOAD
R1 = [0.5, 1.0, 2.0, 4.0]
R2 = [0.25, 0.5, 1.0, 1.5]


def cells(rng) -> dict:
    p = np.arange(4096, dtype=np.int64)
    src = np.ones((4, 4096, 4096))
    return {
        "copy": lambda: src.copy(),
        "fast": lambda: kerple.bias(p, p, "log", R1, R2),
        "golden": lambda: kerple.bias(p, p, "log", R1, R2, mode="golden"),
    }
