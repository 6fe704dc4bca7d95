"""Learned absolute positions's row of `posref bench`'s families table (conformance/commands/bench_families.py): the
cpu reference, fast mode, against a numpy copy of its output's bytes; one mode: a gather and an exact sum.

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, and where golden mode differs, ``golden`` with ``fast_small`` on its smaller workload).
"""

from __future__ import annotations

import numpy as np

from reference import learned

WORKLOAD = "lookup [1, 4096, 1024], table 8192 x 1024"
GOLDEN_WORKLOAD = None
# Why a target of issue 31 is not met on the 2-core VM (posref bench prints it beside the figure).
UNMET = {
    "fast": ("the lookup reads x and the table's rows and writes their sum: three arrays of traffic "
             "against the copy's two, 1.5x at best"),
}


def cells(rng) -> dict:
    x = rng.standard_normal((1, 4096, 1024))
    table = rng.standard_normal((8192, 1024))
    pos = np.arange(4096, dtype=np.int64)[None, :]
    return {"copy": lambda: x.copy(), "fast": lambda: learned.lookup(x, pos, table)}
