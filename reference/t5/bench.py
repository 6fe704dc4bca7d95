"""T5 buckets's row of `posref bench`'s families table (conformance/commands/bench_families.py): the
cpu reference, fast mode, against a numpy copy of its output's bytes (int64); one mode: the buckets are exact integers.

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, and where golden mode differs, ``golden`` with ``fast_small`` on its smaller workload).
"""

from __future__ import annotations

import numpy as np

from reference import t5

WORKLOAD = "bucket [256, 256]"
GOLDEN_WORKLOAD = None


def cells(rng) -> dict:
    rel = np.arange(256, dtype=np.int64)[None, :] - np.arange(256, dtype=np.int64)[:, None]
    src = np.ones((256, 256), dtype=np.int64)
    return {"copy": lambda: src.copy(), "fast": lambda: t5.bucket(rel)}
