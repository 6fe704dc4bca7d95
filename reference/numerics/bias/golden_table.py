"""Golden bias values per distance, broadcast to [h, sq, sk] (ALiBi and KERPLE's golden modes).

Both biases depend on the head and the distance only (d = i - j for causal ALiBi, |i - j|
otherwise), so golden mode rounds one value per (head, distinct distance), and a gather writes
the output: bit for bit what evaluating every entry gives, at the cost of a copy.

``distances(qp, kp, signed)`` -> (dists int64 [n], plan): where the distances span a range no
longer than TABLE_MAX and than the number of entries, every distance of [dmin, dmax] (no sort);
otherwise the distinct ones (np.unique). ``broadcast(table, qp, kp, signed, plan)`` -> [h, sq, sk]
with out[h, i, j] = table[h, index of d(i, j)].
"""

from __future__ import annotations

import numba
import numpy as np

from reference.numerics.bias.kerple_cpu_kernels import _run

TABLE_MAX = 1 << 22


def _d(qp, kp, signed):
    d = qp[:, None] - kp[None, :]
    return d if signed else np.abs(d)


def distances(qp, kp, signed):
    """(distinct distances to evaluate, plan for broadcast): see the module docstring."""
    if qp.size == 0 or kp.size == 0:
        return np.empty(0, dtype=np.int64), ("dense", 0)
    hi = int(qp.max()) - int(kp.min())
    lo = int(qp.min()) - int(kp.max())
    if not signed:
        lo, hi = (0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))
    if hi - lo + 1 <= min(TABLE_MAX, qp.size * kp.size):
        return np.arange(lo, hi + 1, dtype=np.int64), ("dense", lo)
    dists, inverse = np.unique(_d(qp, kp, signed), return_inverse=True)
    return dists, ("sparse", inverse.reshape(qp.size, kp.size))


@numba.njit(cache=True, fastmath=False, parallel=True)
def _gather_kernel(table, qp, kp, signed, offset, out):
    for i in numba.prange(qp.shape[0]):
        for h in range(table.shape[0]):
            for j in range(kp.shape[0]):
                d = qp[i] - kp[j]
                if not signed and d < 0:
                    d = -d
                out[h, i, j] = table[h, d - offset]


def broadcast(table, qp, kp, signed, plan) -> np.ndarray:
    """[h, sq, sk]: out[h, i, j] = the table's value of head h at the distance of (i, j)."""
    kind, arg = plan
    if kind == "sparse":
        return np.ascontiguousarray(table[:, arg])
    out = np.empty((table.shape[0], qp.size, kp.size))
    if out.size:
        _run(_gather_kernel, out.size, np.ascontiguousarray(table), qp, kp, bool(signed), np.int64(arg), out)
    return out
