"""Numba @njit kernels of the attention forward (backend "cpu"). Never fastmath.

Every dot product is Dot2 (Ogita, Rump, Oishi, "Accurate sum and dot product", SIAM J. Sci.
Comput. 26(6), 2005, alg. 5.3): TwoProduct by Dekker's splitting and TwoSum by Knuth, so the
result is as accurate as if computed in twice the working precision, then rounded:
|dot2 - x.y| <= u |x.y| + gamma_n^2 sum |x_k y_k|. The softmax denominator is a compensated sum
(Sum2, same paper, alg. 4.4); exp is libm's (< 1 ulp)."""

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


@numba.njit(cache=True, fastmath=False)
def project_kernel(a, w, out):
    for i in range(a.shape[0]):
        for j in range(w.shape[0]):
            out[i, j] = dot2(a[i], w[j])


@numba.njit(cache=True, fastmath=False)
def attend_kernel(q, keys, values, bias, vis, scale, group, out):
    b, s, hq, d = q.shape
    K = keys.shape[1]
    z = np.empty(K)
    col = np.empty(K)
    for bi in range(b):
        for i in range(s):
            for h in range(hq):
                g = h // group
                top = -np.inf
                for j in range(K):
                    if vis[bi, i, j]:
                        z[j] = dot2(q[bi, i, h], keys[bi, j, g]) * scale + bias[bi, h, i, j]
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
                    for j in range(K):
                        col[j] = values[bi, j, g, x]
                    out[bi, i, h, x] = dot2(z, col) / total


def project(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """a [n, k] @ w[m, k]^T by Dot2 -> [n, m]."""
    out = np.empty((a.shape[0], w.shape[0]))
    project_kernel(np.ascontiguousarray(a), np.ascontiguousarray(w), out)
    return out


def attend(q, keys, values, bias, vis, scale, group) -> np.ndarray:
    """o [b, s, hq, d] from q [b, s, hq, d], keys/values [b, K, hkv, d], bias [b, hq, s, K],
    vis bool [b, s, K]."""
    out = np.empty(q.shape)
    a = np.ascontiguousarray
    attend_kernel(a(q), a(keys), a(values), a(bias), a(vis), float(scale), int(group), out)
    return out
