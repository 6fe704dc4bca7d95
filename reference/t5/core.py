"""T5 relative position buckets (see __init__)."""

from __future__ import annotations

import mpmath
import numpy as np


def _check(num_buckets, max_distance):
    for name, v in (("num_buckets", num_buckets), ("max_distance", max_distance)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 2:
            raise ValueError(f"{name}: must be an integer >= 2, got {v!r}")
    return int(num_buckets), int(max_distance)


def _large(n: int, max_exact: int, buckets: int, max_distance: int):
    """The exact log position (an mpf): ln(n / max_exact) / ln(max_distance / max_exact) * (buckets - max_exact)."""
    with mpmath.workprec(200):
        return mpmath.log(mpmath.mpf(n) / max_exact) / mpmath.log(mpmath.mpf(max_distance) / max_exact) * (
            buckets - max_exact)


def bucket(relative_positions, *, num_buckets=32, max_distance=128, bidirectional=True) -> np.ndarray:
    """int64 buckets, shaped like relative_positions (j - i)."""
    buckets, max_distance = _check(num_buckets, max_distance)
    r = np.asarray(relative_positions)
    if r.dtype.kind not in "iu":
        raise ValueError("relative_positions: must be integers")
    r = r.astype(np.int64)
    out = np.zeros(r.shape, dtype=np.int64)
    if bidirectional:
        buckets //= 2
        out += (r > 0) * buckets
        n = np.abs(r)
    else:
        n = np.maximum(-r, 0)
    max_exact = buckets // 2
    flat_n, flat_out = n.reshape(-1), out.reshape(-1)
    for k, v in enumerate(flat_n.tolist()):
        if v < max_exact:
            flat_out[k] += v
        else:
            large = int(mpmath.floor(_large(v, max_exact, buckets, max_distance)))
            flat_out[k] += min(max_exact + large, buckets - 1)
    return flat_out.reshape(r.shape)


def edges(*, num_buckets=32, max_distance=128, bidirectional=True, limit=4096) -> list:
    """Distances n (>= max_exact, up to limit) whose exact log position is an integer below the cap:
    a float log one ulp low lands one bucket lower there."""
    buckets, max_distance = _check(num_buckets, max_distance)
    if bidirectional:
        buckets //= 2
    max_exact = buckets // 2
    out = []
    for n in range(max_exact, limit + 1):
        x = _large(n, max_exact, buckets, max_distance)
        if 0 < x and max_exact + x < buckets - 1 + 1e-30 and abs(x - mpmath.nint(x)) < mpmath.mpf(2) ** -40:
            out.append(n)
    return out
