"""Numba @njit kernels of T5's buckets (never fastmath; integer arithmetic only).

The bucket of r depends on the direction and on the distance n alone (n = |r|, or max(-r, 0)
when causal), and every n >= max_distance lands in the last bucket, so the distances that need
a logarithm are the max_distance - max_exact values in [max_exact, max_distance). t5.py keeps
their buckets in a table (computed once per distance, with the exact mpmath logarithm) and
``bucket_kernel`` writes each entry in one pass over r: memory-bound (issue 13)."""

import numba
import numpy as np

# below this many entries the kernel runs on the calling thread (a parallel region waits for
# every worker to be scheduled, up to a time slice on a busy machine: reference.numerics.cpu_kernels)
PARALLEL_MIN_WORK = 1 << 22


@numba.njit(cache=True, fastmath=False, inline="always")
def _distance(v, bidirectional):
    # |v|, or max(-v, 0) when causal; -(-2**63) wraps negative, and that distance (2**63)
    # saturates to 2**63 - 1, past every max_distance core.check_config accepts (the last bucket)
    n = -v if v < 0 else (v if bidirectional else 0)
    return n if n >= 0 else 9223372036854775807


@numba.njit(cache=True, fastmath=False, parallel=True)
def bucket_kernel(r, bidirectional, half, max_exact, max_distance, last, table, out):
    """out[k] = the bucket of r[k] (both int64, flat); table[n - max_exact] the bucket of a distance
    n in [max_exact, max_distance), or -1 where not yet known. Returns how many entries met a -1
    (those are written wrong: the caller fills the table and runs again). r and out are flat int64;
    the table has at least one entry."""
    missing = 0
    top = table.shape[0] - 1
    for k in numba.prange(r.shape[0]):
        v = r[k]
        n = _distance(v, bidirectional)
        base = half if (bidirectional and v > 0) else 0
        # selects instead of branches (the loop vectorises): the table is read at a clamped index
        t = table[min(max(n - max_exact, 0), top)]
        small = n < max_exact
        beyond = n >= max_distance
        missing += (t < 0) & (not small) & (not beyond)
        out[k] = base + (n if small else (last if beyond else t))
    return missing


@numba.njit(cache=True, fastmath=False)
def unknown_distances(r, bidirectional, max_exact, max_distance, table):
    """The distinct distances n in [max_exact, max_distance) of r whose table entry is -1, sorted."""
    seen = np.zeros(table.shape[0], dtype=np.bool_)
    count = 0
    for k in range(r.shape[0]):
        n = _distance(r[k], bidirectional)
        if max_exact <= n < max_distance and table[n - max_exact] < 0 and not seen[n - max_exact]:
            seen[n - max_exact] = True
            count += 1
    out = np.empty(count, dtype=np.int64)
    j = 0
    for i in range(seen.shape[0]):
        if seen[i]:
            out[j] = max_exact + i
            j += 1
    return out


def run(r, bidirectional, half, max_exact, max_distance, last, table, out):
    """bucket_kernel(...), on one thread when r has fewer than PARALLEL_MIN_WORK entries."""
    threads = numba.get_num_threads()
    if r.shape[0] >= PARALLEL_MIN_WORK or threads == 1:
        return bucket_kernel(r, bidirectional, half, max_exact, max_distance, last, table, out)
    numba.set_num_threads(1)
    try:
        return bucket_kernel(r, bidirectional, half, max_exact, max_distance, last, table, out)
    finally:
        numba.set_num_threads(threads)
