"""KERPLE identities."""

from __future__ import annotations

import numpy as np

from reference.identities import register
from reference.kerple import bias

# Parameters across the clamp range, its edges included (and beyond them, where the clamp acts).
_PARAMS = {
    "log": ([0.01, 0.37, 2.0, 0.001, 5.0], [0.01, 0.43, 1.0, -0.5, 40.0]),
    "power": ([0.01, 0.21, 1.5, -1.0, 3.0], [0.01, 0.61, 2.0, 0.0001, 7.5]),
}


@register(id="kerple.distance-only", bound=0.0,
          statement="the bias depends on |i - j| only: shifting queries and keys by the same offset "
          "(up to 2^30) leaves every value unchanged, both variants")
def distance_only() -> float:
    """Residual: max |b(q + s, k + s) - b(q, k)| in fast mode. Bound 0: the kernels form the exact
    integer |i - j| first, so the same float operations run on the same operands."""
    q, k = np.arange(0, 40, 3), np.arange(0, 40, 2)
    worst = 0.0
    for variant, (r1, r2) in _PARAMS.items():
        ref = bias(q, k, variant, r1, r2, backend="cpu")
        for s in (1, 4095, 2**20 - 7, 2**30):
            worst = max(worst, float(np.max(np.abs(bias(q + s, k + s, variant, r1, r2, backend="cpu") - ref))))
    return worst


@register(id="kerple.monotone-decay", bound=0.0,
          statement="for parameters across the clamp range (edges and out-of-range values included) the "
          "bias is non-increasing in the distance |i - j| (distances 0..96 and near 4095)")
def monotone_decay() -> float:
    """Residual: the largest increase b(n + 1) - b(n) over consecutive distances, golden values
    (0 when none increases). Bound 0: after the clamps r1, r2 > 0, so log(1 + r2 n) and n^r2 are
    increasing and -r1 times them decreasing; golden values are the nearest doubles of the exact
    ones, and rounding to nearest is monotone."""
    n = np.concatenate([np.arange(0, 97), np.arange(4088, 4097)])
    worst = 0.0
    for variant, (r1, r2) in _PARAMS.items():
        b = bias(np.array([0]), n, variant, r1, r2, mode="golden")[:, 0, :]
        steps = np.diff(b, axis=-1)[:, np.diff(n) == 1]
        worst = max(worst, float(np.max(steps, initial=0.0)))
    return max(worst, 0.0)
