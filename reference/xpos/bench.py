"""xPos's row of `posref bench`'s families table (conformance/commands/bench_families.py): the
cpu reference, fast mode, against a numpy copy of its output's bytes (q and k together); golden mode (mpmath per value) on a small workload.

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, and where golden mode differs, ``golden`` with ``fast_small`` on its smaller workload).
"""

from __future__ import annotations

import numpy as np

from reference import xpos

WORKLOAD = "apply q, k [1, 1024, 32, 128]"
GOLDEN_WORKLOAD = "apply q, k [1, 2, 4, 128]"


def cells(rng) -> dict:
    qk = rng.standard_normal((1, 2048, 32, 128))
    q, k = qk[:, :1024], qk[:, 1024:]
    pos = np.arange(1024, dtype=np.int64)[None, :]
    small = rng.standard_normal((1, 4, 4, 128))
    sq, sk = small[:, :2], small[:, 2:]
    spos = np.arange(2, dtype=np.int64)[None, :]
    return {
        "copy": lambda: qk.copy(),
        "fast": lambda: xpos.apply(q, k, pos),
        "fast_small": lambda: xpos.apply(sq, sk, spos),
        "golden": lambda: xpos.apply(sq, sk, spos, mode="golden"),
    }
