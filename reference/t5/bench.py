"""T5 buckets's row of `posref bench`'s families table (conformance/commands/bench_families.py): the
cpu reference, fast mode, against a numpy copy of its output's bytes (int64); one mode: the buckets are exact integers.

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, and where golden mode differs, ``golden`` with ``fast_small`` on its smaller workload).
"""

from __future__ import annotations

import numpy as np

from reference import t5

# [4096, 4096] like the bias families: at [256, 256] (chosen when a bucket took 16 us) the 512 KB
# copy ran at cache speed (35 us) and the kernel's fixed ~10 us per call dominated the ratio.
WORKLOAD = "bucket [4096, 4096]"
GOLDEN_WORKLOAD = None
# Why a target of issue 31 is not met on the 2-core VM (posref bench prints it beside the figure).
UNMET = {
    "fast": ("one pass over the int64 relative positions with a clamped read of the per-distance table "
             "and selects per entry, writing int64 buckets: memory-bound like the copy, plus that work"),
}


def cells(rng) -> dict:
    p = np.arange(4096, dtype=np.int64)
    rel = p[None, :] - p[:, None]
    src = np.ones((4096, 4096), dtype=np.int64)
    return {"copy": lambda: src.copy(), "fast": lambda: t5.bucket(rel)}
