"""M-RoPE's row of `posref bench`'s families table (conformance/commands/bench_families.py): the
cpu reference, fast mode, against a numpy copy of its output's bytes; golden mode (the certified quick phase,
phase.py) on the same workload as fast mode (issue 31).

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, ``golden``; golden runs on the fast workload, so there is no ``fast_small``).
"""

from __future__ import annotations

import numpy as np

import math

from reference import mrope

WORKLOAD = "apply [1, 4096, 32, 128], qwen2 [16, 24, 24]"
GOLDEN_WORKLOAD = None  # golden is timed on WORKLOAD, next to fast
# Why a target of issue 31 is not met on the 2-core VM (posref bench prints it beside the figure).
UNMET = {
    "golden": ("the certified quick phase is compute-bound: about 40 operations per output (double-double "
               "cos/sin and products, Ziv's test), what RoPE's own golden apply costs (2.5-3.3x RoPE's "
               "fast on this machine), plus a per-pair stream position and table entry, against a fast "
               "mode that runs at copy speed"),
}
SECTION = [16, 24, 24]


def positions(seq: int) -> np.ndarray:
    """[3, 1, seq]: the (t, h, w) of an image of side isqrt(seq) in Qwen2-VL's layout (t = 0)."""
    side = int(math.isqrt(seq))
    t = np.arange(seq, dtype=np.int64)
    return np.stack([np.zeros(seq, dtype=np.int64), t // side, t % side])[:, None, :]


def cells(rng) -> dict:
    x = rng.standard_normal((1, 4096, 32, 128))
    mp = positions(4096)
    return {
        "copy": lambda: x.copy(),
        "fast": lambda: mrope.apply(x, mp, mrope_section=SECTION),
        "golden": lambda: mrope.apply(x, mp, mrope_section=SECTION, mode="golden"),
    }
