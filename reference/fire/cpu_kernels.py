"""Numba @njit kernel of the FIRE bias (backend "cpu"). Never fastmath: log1p, the division, and
the hidden units summed in order, within reference.fire.fast_bound.

Layout of the work (issue 13; the values are bit-identical to evaluating each entry on its own,
since every entry sees the same operations in the same order): one query row at a time (rows in
parallel), the numerator psi(|i - j|) = log1p(|c d|) taken from a per-distance table where the
distances span a short range, and the MLP evaluated for the whole row at once, hidden unit by
hidden unit, so that the inner loops run over the keys and vectorise. The MLP (hidden
multiply-adds and ReLUs, then heads x hidden multiply-adds per entry) keeps this compute-bound."""

import math

import numba
import numpy as np

TABLE_MAX = 1 << 22  # the per-distance table: at most this many entries, and fewer than sq * sk
PARALLEL_MIN_WORK = 1 << 18  # output values x hidden units below which one thread runs it


@numba.njit(cache=True, fastmath=False, inline="always")
def _row(i, qp, kp, c, L, eps, w1, b1, w2, b2, num, use_table, x, act, out):
    norm = math.log1p(abs(c * max(float(qp[i]), L))) + eps
    sk = kp.shape[0]
    if use_table:
        for j in range(sk):
            x[j] = num[abs(qp[i] - kp[j])] / norm
    else:
        for j in range(sk):
            x[j] = math.log1p(abs(c * float(abs(qp[i] - kp[j])))) / norm
    for h in range(w2.shape[0]):
        for j in range(sk):
            out[h, i, j] = b2[h]
    for k in range(w1.shape[0]):
        for j in range(sk):
            act[j] = max(w1[k] * x[j] + b1[k], 0.0)
        for h in range(w2.shape[0]):
            w = w2[h, k]
            for j in range(sk):
                out[h, i, j] += w * act[j]


@numba.njit(cache=True, fastmath=False, parallel=True)
def bias_kernel(qp, kp, c, L, eps, w1, b1, w2, b2, dmax, out):
    use_table = dmax >= 0
    num = np.empty(max(dmax + 1, 0))
    for d in numba.prange(num.shape[0]):
        num[d] = math.log1p(abs(c * float(d)))
    for i in numba.prange(qp.shape[0]):
        x = np.empty(kp.shape[0])
        act = np.empty(kp.shape[0])
        _row(i, qp, kp, c, L, eps, w1, b1, w2, b2, num, use_table, x, act, out)


def bias(qp, kp, c, L, eps, w1, b1, w2, b2) -> np.ndarray:
    out = np.empty((w2.shape[0], qp.shape[0], kp.shape[0]))
    if out.size == 0:
        return out
    a = np.ascontiguousarray
    qp, kp = a(qp), a(kp)
    dmax = int(max(abs(int(qp.max()) - int(kp.min())), abs(int(kp.max()) - int(qp.min()))))
    if dmax >= min(TABLE_MAX, qp.shape[0] * kp.shape[0]):
        dmax = -1  # no table: log1p per entry
    args = (qp, kp, float(c), float(L), float(eps), a(w1), a(b1), a(w2), a(b2), dmax, out)
    threads = numba.get_num_threads()
    if out.size * w1.shape[0] >= PARALLEL_MIN_WORK or threads == 1:
        bias_kernel(*args)
        return out
    numba.set_num_threads(1)  # small: on the calling thread (see reference.rope.cpu_kernels)
    try:
        bias_kernel(*args)
    finally:
        numba.set_num_threads(threads)
    return out
