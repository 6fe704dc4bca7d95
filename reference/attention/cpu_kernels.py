"""Numba @njit kernels of the attention forward (backend "cpu"). Never fastmath.

Every dot product is Dot2 (Ogita, Rump, Oishi, "Accurate sum and dot product", SIAM J. Sci.
Comput. 26(6), 2005, alg. 5.3): TwoProduct by Dekker's splitting and TwoSum by Knuth, so the
result is as accurate as if computed in twice the working precision, then rounded:
|dot2 - x.y| <= u |x.y| + gamma_n^2 sum |x_k y_k|. The softmax denominator is a compensated sum
(Sum2, same paper, alg. 4.4); exp is libm's (< 1 ulp).

Layout of the work (issue 13): each output is the same sequence of operations as ``dot2`` on
its own (the same terms in the same order), so the results are bit-identical to one ``dot2`` per
output; but many outputs are advanced together, term by term, so that the inner loops run over
independent outputs and vectorise (``dot2`` alone is a chain of dependent additions), and rows
run in parallel on Numba's pool (small calls on the calling thread, as in
reference.rope.cpu_kernels). Compute-bound: Dot2 costs about 20 floating-point operations per
multiply-add (Dekker's splitting, TwoSum), against 2 in a BLAS product."""

import math

import numba
import numpy as np

_SPLIT = 134217729.0  # 2^27 + 1: Dekker's splitter for 53-bit significands


@numba.njit(cache=True, fastmath=False, inline="always")
def two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@numba.njit(cache=True, fastmath=False, inline="always")
def two_prod(a, b):
    p = a * b
    c = _SPLIT * a
    ah = c - (c - a)
    al = a - ah
    c = _SPLIT * b
    bh = c - (c - b)
    bl = b - bh
    return p, al * bl - (((p - ah * bh) - al * bh) - ah * bl)


@numba.njit(cache=True, fastmath=False)
def dot2(x, y):
    s, c = 0.0, 0.0
    for k in range(x.shape[0]):
        p, e = two_prod(x[k], y[k])
        s, f = two_sum(s, p)
        c += e + f
    return s + c


@numba.njit(cache=True, fastmath=False, parallel=True)
def project_kernel(a, wt, out):
    """out[i, j] = dot2(a[i], wt[:, j]) for a [n, k], wt [k, m] (w transposed)."""
    n, kd = a.shape
    m = wt.shape[1]
    for i in numba.prange(n):
        s = np.zeros(m)
        c = np.zeros(m)
        for k in range(kd):
            x = a[i, k]
            for j in range(m):
                p, e = two_prod(x, wt[k, j])
                t, f = two_sum(s[j], p)
                s[j] = t
                c[j] += e + f
        for j in range(m):
            out[i, j] = s[j] + c[j]


@numba.njit(cache=True, fastmath=False, inline="always")
def _attend_row(bi, i, q, keys_t, values, bias, vis, scale, group, out, z, zs, zc, os, oc):
    hq, d = q.shape[2], q.shape[3]
    K = keys_t.shape[3]
    end = 0  # one past the last visible key: later slots hold exact zeros in every sum
    for j in range(K):
        if vis[bi, i, j]:
            end = j + 1
    for h in range(hq):
        g = h // group
        for j in range(end):
            zs[j] = 0.0
            zc[j] = 0.0
        for e in range(d):  # dot2(q[bi, i, h], keys[bi, j, g]) for every j at once
            x = q[bi, i, h, e]
            for j in range(end):
                p, err = two_prod(x, keys_t[bi, g, e, j])
                t, f = two_sum(zs[j], p)
                zs[j] = t
                zc[j] += err + f
        top = -np.inf
        for j in range(end):
            if vis[bi, i, j]:
                z[j] = (zs[j] + zc[j]) * scale + bias[bi, h, i, j]
                top = max(top, z[j])
        if top == -np.inf:
            for x in range(d):
                out[bi, i, h, x] = 0.0
            continue
        total, comp = 0.0, 0.0
        for j in range(K):
            z[j] = math.exp(z[j] - top) if vis[bi, i, j] else 0.0
            total, e = two_sum(total, z[j])
            comp += e
        total += comp
        for x in range(d):
            os[x] = 0.0
            oc[x] = 0.0
        for j in range(end):  # dot2(z, values[bi, :, g, x]) for every x at once
            zj = z[j]
            for x in range(d):
                p, err = two_prod(zj, values[bi, j, g, x])
                t, f = two_sum(os[x], p)
                os[x] = t
                oc[x] += err + f
        for x in range(d):
            if os[x] == 0.0:
                # the terms past ``end`` (z = +0) leave s + c unchanged when s != 0; a zero s
                # takes them as dot2 does, for the sign of a zero result
                for j in range(end, K):
                    p, err = two_prod(z[j], values[bi, j, g, x])
                    t, f = two_sum(os[x], p)
                    os[x] = t
                    oc[x] += err + f
            out[bi, i, h, x] = (os[x] + oc[x]) / total


@numba.njit(cache=True, fastmath=False, parallel=True)
def attend_kernel(q, keys_t, values, bias, vis, scale, group, out):
    b, s = q.shape[0], q.shape[1]
    d = q.shape[3]
    K = keys_t.shape[3]
    half = (s + 1) // 2
    for t in numba.prange(b * half):  # rows i and s-1-i together: causal rows cost ~ i
        bi, r = t // half, t % half
        z = np.empty(K)
        zs = np.empty(K)
        zc = np.empty(K)
        os = np.empty(d)
        oc = np.empty(d)
        _attend_row(bi, r, q, keys_t, values, bias, vis, scale, group, out, z, zs, zc, os, oc)
        if s - 1 - r != r:
            _attend_row(bi, s - 1 - r, q, keys_t, values, bias, vis, scale, group, out, z, zs, zc, os, oc)


# below this many multiply-adds a kernel runs on the calling thread: a parallel region waits for
# every worker to be scheduled, up to a time slice on a busy machine (reference.rope.cpu_kernels)
PARALLEL_MIN_WORK = 1 << 22


def _run(kernel, work, *args):
    threads = numba.get_num_threads()
    if work >= PARALLEL_MIN_WORK or threads == 1:
        return kernel(*args)
    numba.set_num_threads(1)
    try:
        return kernel(*args)
    finally:
        numba.set_num_threads(threads)


def project(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """a [n, k] @ w[m, k]^T by Dot2 -> [n, m]."""
    out = np.empty((a.shape[0], w.shape[0]))
    if out.size:
        _run(project_kernel, out.size * a.shape[1], np.ascontiguousarray(a), np.ascontiguousarray(w.T), out)
    return out


def attend(q, keys, values, bias, vis, scale, group) -> np.ndarray:
    """o [b, s, hq, d] from q [b, s, hq, d], keys/values [b, K, hkv, d], bias [b, hq, s, K],
    vis bool [b, s, K]."""
    out = np.empty(q.shape)
    if out.size == 0:
        return out
    a = np.ascontiguousarray
    keys_t = a(np.transpose(keys, (0, 2, 3, 1)))  # [b, hkv, d, K]: the keys of one channel together
    work = 2 * q.shape[0] * q.shape[1] * q.shape[2] * keys.shape[1] * q.shape[3]
    _run(attend_kernel, work, a(q), keys_t, a(values), a(bias), a(vis), float(scale), int(group), out)
    return out
