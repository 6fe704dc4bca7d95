"""Numba @njit kernel of the KERPLE bias (backend "cpu"). Never fastmath: the same operations as
the NumPy backend (log1p or pow, then one product), so within FAST_ULPS of the exact value.

The bias of head h depends on the distance d = |i - j| only, so where the distances span a
short range (a prefill square: 0..n-1, against n^2 entries) each head's values are computed once
per distance, by the same expression, and gathered: bit-identical to evaluating every entry, and
memory-bound instead of one libm call per entry (issue 13)."""

import math

import numba
import numpy as np

# the per-distance table is used when it has at most this many entries per head, and fewer than
# the entries of the bias (so it never costs more libm calls than the direct loop)
TABLE_MAX = 1 << 22
# below this many output values a kernel runs on the calling thread (a parallel region waits
# for every worker to be scheduled, up to a time slice on a busy machine: reference.numerics.cpu_kernels)
PARALLEL_MIN_WORK = 1 << 22


@numba.njit(cache=True, fastmath=False, inline="always")
def _value(r1, r2, d, log_variant):
    if log_variant:
        x = r2 * d
        if math.isinf(x):  # r2 d past 2**1024: log1p(x) = ln r2 + ln d to within 2**-1024 (core.FAST_ULPS)
            return -r1 * (math.log(r2) + math.log(d))
        return -r1 * math.log1p(x)
    return -r1 * d ** r2


@numba.njit(cache=True, fastmath=False, parallel=True)
def bias_kernel(r1, r2, qp, kp, log_variant, out):
    for i in numba.prange(qp.shape[0]):
        for h in range(r1.shape[0]):
            for j in range(kp.shape[0]):
                out[h, i, j] = _value(r1[h], r2[h], float(abs(qp[i] - kp[j])), log_variant)


@numba.njit(cache=True, fastmath=False, parallel=True)
def table_kernel(r1, r2, qp, kp, dmax, log_variant, out):
    heads = r1.shape[0]
    table = np.empty((heads, dmax + 1))
    for d in numba.prange(dmax + 1):
        for h in range(heads):
            table[h, d] = _value(r1[h], r2[h], float(d), log_variant)
    for i in numba.prange(qp.shape[0]):
        for h in range(heads):
            for j in range(kp.shape[0]):
                out[h, i, j] = table[h, abs(qp[i] - kp[j])]


def _run(kernel, work, *args):
    """kernel(*args), on one thread when ``work`` is below PARALLEL_MIN_WORK."""
    threads = numba.get_num_threads()
    if work >= PARALLEL_MIN_WORK or threads == 1:
        return kernel(*args)
    numba.set_num_threads(1)
    try:
        return kernel(*args)
    finally:
        numba.set_num_threads(threads)


def bias(r1, r2, qp, kp, log_variant: bool) -> np.ndarray:
    out = np.empty((r1.shape[0], qp.shape[0], kp.shape[0]))
    if out.size == 0:
        return out
    a = np.ascontiguousarray
    r1, r2, qp, kp = a(r1), a(r2), a(qp), a(kp)
    dmax = int(max(abs(int(qp.max()) - int(kp.min())), abs(int(kp.max()) - int(qp.min()))))
    if dmax < min(TABLE_MAX, qp.shape[0] * kp.shape[0]):
        _run(table_kernel, out.size, r1, r2, qp, kp, dmax, bool(log_variant), out)
    else:
        _run(bias_kernel, out.size, r1, r2, qp, kp, bool(log_variant), out)
    return out
