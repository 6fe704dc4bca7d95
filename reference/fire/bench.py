"""FIRE's row of `posref bench`'s families table (conformance/commands/bench_families.py): the cpu
reference, fast mode, against a numpy copy of its output's bytes; golden mode (the MLP's exact
segments and a double-double quick phase, reference/numerics/bias/fire_golden.py) on the same
workload.

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, and where golden mode differs, ``golden`` with ``fast_small`` on its smaller workload).
"""

from __future__ import annotations

import numpy as np

from reference import fire

WORKLOAD = "bias [4, 4096, 4096], hidden 32"
GOLDEN_WORKLOAD = None  # golden is timed on WORKLOAD


def weights(rng, heads: int, hidden: int = 32) -> dict:
    """FIRE's MLP weights for ``heads`` heads, drawn from ``rng`` at the scale of a trained layer."""
    return {"c": 0.1, "L_multiplier": 1.0, "W1": rng.uniform(-0.5, 0.5, (hidden, 1)),
            "b1": rng.uniform(-0.5, 0.5, hidden), "W2": rng.uniform(-0.125, 0.125, (heads, hidden)),
            "b2": rng.uniform(-0.125, 0.125, heads)}


def cells(rng) -> dict:
    p = np.arange(4096, dtype=np.int64)
    src = np.ones((4, 4096, 4096))
    w = weights(rng, 4)
    return {
        "copy": lambda: src.copy(),
        "fast": lambda: fire.bias(p, p, w),
        "golden": lambda: fire.bias(p, p, w, mode="golden"),
    }
