"""T5 relative position buckets: the rule and API of reference.t5 (its docstring states them), shared
with the attention composite, which reads its bias table at these buckets."""

from __future__ import annotations

import threading
from collections import OrderedDict

import mpmath
import numpy as np

INT64_MAX = 2**63 - 1


def check_config(num_buckets, max_distance, bidirectional):
    """(buckets per direction, max_exact, max_distance) of a configuration the rule is defined for,
    or a one-line ValueError naming the argument.

    The log buckets divide by ln(max_exact) terms: max_exact = buckets // 2 must be >= 1 (so
    bidirectional needs num_buckets >= 4) and max_distance must exceed max_exact (equal divides by
    ln 1 = 0; below it the log position is negative, so are the buckets). max_distance <= 2**63 - 1
    lets a distance saturate there exactly (every n >= max_distance is the last bucket)."""
    for name, v in (("num_buckets", num_buckets), ("max_distance", max_distance)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not 2 <= v <= INT64_MAX:
            raise ValueError(f"{name}: must be an integer in [2, 2**63 - 1], got {v!r}")
    buckets, max_distance = int(num_buckets), int(max_distance)
    half = buckets // 2 if bidirectional else buckets
    max_exact = half // 2
    if max_exact < 1:
        raise ValueError(f"num_buckets: must be >= 4 when bidirectional (max_exact = num_buckets // 4 must be "
                         f">= 1: the log buckets divide by it), got {buckets}")
    if max_distance <= max_exact:
        raise ValueError(f"max_distance: must exceed max_exact = {max_exact} (the log buckets span distances "
                         f"[max_exact, max_distance) and divide by ln(max_distance / max_exact)), got {max_distance}")
    return half, max_exact, max_distance


def _as_int64(r: np.ndarray, max_distance: int) -> np.ndarray:
    """int64 relative positions with the same buckets: an unsigned value past 2**63 - 1 (which a cast
    would wrap negative) is clipped to max_distance, where its bucket (the last one) already is."""
    if r.dtype.kind == "u" and r.dtype.itemsize == 8 and r.size and r.max() > INT64_MAX:
        r = np.minimum(r, np.uint64(max_distance))
    return r.astype(np.int64, copy=False)


def _large(n: int, max_exact: int, buckets: int, max_distance: int):
    """The exact log position (an mpf): ln(n / max_exact) / ln(max_distance / max_exact) * (buckets - max_exact)."""
    with mpmath.workprec(200):
        return mpmath.log(mpmath.mpf(n) / max_exact) / mpmath.log(mpmath.mpf(max_distance) / max_exact) * (
            buckets - max_exact)


# The kernel path keeps, per (max_exact, buckets, max_distance), the buckets of the distances in
# [max_exact, max_distance) that calls have met (each computed once, exactly): a table of at most
# TABLE_MAX int64 entries (-1: not yet computed), for at most TABLE_CONFIGS configurations.
TABLE_MAX = 1 << 20
TABLE_CONFIGS = 8
# bucket counts up to this keep every int64 sum below 2**63 (half + last < 2**63)
KERNEL_MAX_BUCKETS = 1 << 61

_tables: OrderedDict = OrderedDict()
_tables_lock = threading.Lock()


def _one(n: int, max_exact: int, buckets: int, max_distance: int) -> int:
    """The bucket of a distance n >= max_exact (capped at buckets - 1)."""
    return min(max_exact + int(mpmath.floor(_large(n, max_exact, buckets, max_distance))), buckets - 1)


def _table(max_exact: int, buckets: int, max_distance: int) -> np.ndarray:
    key = (max_exact, buckets, max_distance)
    with _tables_lock:
        tab = _tables.get(key)
        if tab is None:
            tab = _tables[key] = np.full(max_distance - max_exact, -1, dtype=np.int64)
            while len(_tables) > TABLE_CONFIGS:
                _tables.popitem(last=False)
        _tables.move_to_end(key)
        return tab


def _bucket_kernel(r, bidirectional, buckets, max_exact, max_distance) -> np.ndarray:
    """One pass over r (t5_cpu_kernels.bucket_kernel); distances in [max_exact, max_distance) from the
    per-configuration table, each computed by _one the first time a call meets it."""
    from . import t5_cpu_kernels as cpu_kernels  # numba start-up: imported on first use

    flat = np.ascontiguousarray(r).reshape(-1)
    out = np.empty(flat.shape, dtype=np.int64)
    tab = _table(max_exact, buckets, max_distance)
    args = (flat, bool(bidirectional), buckets if bidirectional else 0, max_exact, max_distance, buckets - 1, tab, out)
    if cpu_kernels.run(*args):
        for n in cpu_kernels.unknown_distances(flat, bool(bidirectional), max_exact, max_distance, tab).tolist():
            tab[n - max_exact] = _one(n, max_exact, buckets, max_distance)
        cpu_kernels.run(*args)
    return out.reshape(r.shape)


def bucket(relative_positions, *, num_buckets=32, max_distance=128, bidirectional=True) -> np.ndarray:
    """int64 buckets, shaped like relative_positions (j - i).

    The bucket depends on the direction and the distance n only: each distinct n >= max_exact is
    evaluated once (exact mpmath logarithm), every n >= max_distance is the last bucket without
    one (there the exact log position is at least buckets - max_exact), and the entries are
    gathered in one pass (t5_cpu_kernels.py) where the configuration allows.
    """
    half, max_exact, max_distance = check_config(num_buckets, max_distance, bidirectional)
    r = np.asarray(relative_positions)
    if r.dtype.kind not in "iu":
        raise ValueError("relative_positions: must be integers")
    r = _as_int64(r, max_distance)
    if r.size and max_distance - max_exact <= TABLE_MAX \
            and half <= KERNEL_MAX_BUCKETS:
        return _bucket_kernel(r, bidirectional, half, max_exact, max_distance)
    return _bucket_general(r, half, max_exact, max_distance, bidirectional)


def _bucket_general(r, buckets, max_exact, max_distance, bidirectional) -> np.ndarray:
    """Any configuration check_config accepts (huge max_distance too): _one once per distinct
    n >= max_exact, the rest vectorised."""
    out = np.zeros(r.shape, dtype=np.int64)
    if bidirectional:
        out += (r > 0) * buckets
        n = np.abs(r)
    else:
        n = np.where(r < 0, -r, 0)
    # -(-2**63) wraps to -2**63: that distance, 2**63, saturates to 2**63 - 1 >= max_distance (the last bucket)
    n = np.where(n < 0, INT64_MAX, n)
    flat_n, flat_out = n.reshape(-1), out.reshape(-1)
    small = flat_n < max_exact
    flat_out[small] += flat_n[small]
    large = np.flatnonzero(~small)
    if large.size:
        values, inverse = np.unique(flat_n[large], return_inverse=True)
        # every n >= max_distance is in the last bucket (its log position is >= buckets - max_exact)
        per = [buckets - 1 if v >= max_distance else _one(v, max_exact, buckets, max_distance)
               for v in values.tolist()]
        flat_out[large] += np.array(per, dtype=np.int64)[inverse.reshape(-1)]
    return flat_out.reshape(r.shape)


def edges(*, num_buckets=32, max_distance=128, bidirectional=True, limit=4096) -> list:
    """Distances n (>= max_exact, up to limit) whose exact log position is an integer below the cap:
    a float log one ulp low lands one bucket lower there."""
    buckets, max_exact, max_distance = check_config(num_buckets, max_distance, bidirectional)
    out = []
    for n in range(max_exact, limit + 1):
        x = _large(n, max_exact, buckets, max_distance)
        if 0 < x and max_exact + x < buckets - 1 + 1e-30 and abs(x - mpmath.nint(x)) < mpmath.mpf(2) ** -40:
            out.append(n)
    return out
