"""Gaussian-kernel RoPE's row of `posref bench`'s families table (conformance/commands/bench_families.py): the
cpu reference, fast mode, against a numpy copy of its output's bytes; golden mode (mpmath per value) on a small workload.

``cells(rng)`` builds the inputs once and returns the callables the table times (keys ``copy``,
``fast``, and where golden mode differs, ``golden`` with ``fast_small`` on its smaller workload).
"""

from __future__ import annotations

import numpy as np

from reference import gaussian_rope

WORKLOAD = "apply [1, 4096, 32, 128]"
GOLDEN_WORKLOAD = "apply [1, 4, 4, 128]"


def cells(rng) -> dict:
    x = rng.standard_normal((1, 4096, 32, 128))
    pos = np.arange(4096, dtype=np.int64)[None, :]
    small = rng.standard_normal((1, 4, 4, 128))
    spos = np.arange(4, dtype=np.int64)[None, :]
    kernel = gaussian_rope.DOCUMENT_KERNEL
    return {
        "copy": lambda: x.copy(),
        "fast": lambda: gaussian_rope.apply(x, pos, kernel=kernel),
        "fast_small": lambda: gaussian_rope.apply(small, spos, kernel=kernel),
        "golden": lambda: gaussian_rope.apply(small, spos, kernel=kernel, mode="golden"),
    }
