"""ALiBi's row of `posref bench`'s families table (conformance/commands/bench_families.py): the
cpu reference, fast mode, against a numpy copy of its output's bytes; golden mode (mpmath per value) on a small workload.

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, and where golden mode differs, ``golden`` with ``fast_small`` on its smaller workload).
"""

from __future__ import annotations

import numpy as np

from reference import alibi

WORKLOAD = "bias [4, 4096, 4096]"
GOLDEN_WORKLOAD = "bias [4, 64, 64]"


def cells(rng) -> dict:
    p = np.arange(4096, dtype=np.int64)
    src = np.ones((4, 4096, 4096))
    small = np.arange(64, dtype=np.int64)
    return {
        "copy": lambda: src.copy(),
        "fast": lambda: alibi.bias(4, p, p),
        "fast_small": lambda: alibi.bias(4, small, small),
        "golden": lambda: alibi.bias(4, small, small, mode="golden"),
    }
