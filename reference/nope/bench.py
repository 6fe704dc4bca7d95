"""NoPE's row of `posref bench`'s families table (conformance/commands/bench_families.py): the
cpu reference, fast mode, against a numpy copy of its output's bytes; golden mode is the same copy.

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, and where golden mode differs, ``golden`` with ``fast_small`` on its smaller workload).
"""

from __future__ import annotations

import numpy as np

from reference import nope

WORKLOAD = "apply [1, 4096, 32, 128]"
GOLDEN_WORKLOAD = None


def cells(rng) -> dict:
    x = rng.standard_normal((1, 4096, 32, 128))
    pos = np.arange(4096, dtype=np.int64)[None, :]
    return {"copy": lambda: x.copy(), "fast": lambda: nope.apply(x, pos),
            "golden": lambda: nope.apply(x, pos, mode="golden")}
