"""Numba @njit kernels of the attention forward and backward (backend "cpu"). Never fastmath.

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
reference.numerics.cpu_kernels). Compute-bound: Dot2 costs about 20 floating-point operations per
multiply-add (Dekker's splitting, TwoSum), against 2 in a BLAS product.

The backward (reference/attention/backward.py, backend "cpu") reuses ``project`` for its
products with the weights and two kernels in the same layout: ``softmax_backward_kernel`` per
query row (the forward's weights and o, then dP, delta, dS and dQr), ``key_value_backward_kernel``
per new token (dKr, dV over the group's heads and the queries), both Dot2; ``t5_scatter_kernel``
sums dS by T5 bucket in NumPy's order."""

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


@numba.njit(cache=True, fastmath=False, inline="always")
def _add_terms(x, col, n, s, c):
    """One Dot2 step of n dot products at once: s[j], c[j] take the term x * col[j] (TwoProduct,
    TwoSum; the output is s + c), j < n."""
    for j in range(n):
        p, e = two_prod(x, col[j])
        t, f = two_sum(s[j], p)
        s[j] = t
        c[j] += e + f


@numba.njit(cache=True, fastmath=False, inline="always")
def _dot2_rows(w, rows, n_terms, n, s, c):
    """s[j] + c[j] = dot2(w[:n_terms], rows[:n_terms, j]) for j < n, advanced term by term (rows
    C-contiguous: a strided view would keep the inner loop from vectorising)."""
    for j in range(n):
        s[j] = 0.0
        c[j] = 0.0
    for t in range(n_terms):
        _add_terms(w[t], rows[t], n, s, c)


@numba.njit(cache=True, fastmath=False, parallel=True)
def project_kernel(a, wt, out):
    """out[i, j] = dot2(a[i], wt[:, j]) for a [n, k], wt [k, m] (w transposed)."""
    n, kd = a.shape
    m = wt.shape[1]
    for i in numba.prange(n):
        s = np.zeros(m)
        c = np.zeros(m)
        for k in range(kd):
            _add_terms(a[i, k], wt[k], m, s, c)
        for j in range(m):
            out[i, j] = s[j] + c[j]


@numba.njit(cache=True, fastmath=False, inline="always")
def _visible_end(bi, i, vis):
    """One past query i's last visible key slot: later slots hold exact zeros in every sum."""
    end = 0
    for j in range(vis.shape[2]):
        if vis[bi, i, j]:
            end = j + 1
    return end


@numba.njit(cache=True, fastmath=False, inline="always")
def _row_exp(bi, i, h, g, end, q, keys_t, bias, vis, scale, z, zs, zc):
    """z[j] <- exp(z_j - max z), z_j = dot2(q_hi, k_gj) scale + b_hij, for row (bi, i, h) (0 where
    key j is not visible); returns their compensated sum (Sum2), or 0 for a row that sees no key."""
    K = keys_t.shape[3]
    _dot2_rows(q[bi, i, h], keys_t[bi, g], q.shape[3], end, zs, zc)  # dot2(q_hi, k_gj) for every j < end
    top = -np.inf
    for j in range(end):
        if vis[bi, i, j]:
            z[j] = (zs[j] + zc[j]) * scale + bias[bi, h, i, j]
            top = max(top, z[j])
    if top == -np.inf:
        return 0.0
    total, comp = 0.0, 0.0
    for j in range(K):
        z[j] = math.exp(z[j] - top) if vis[bi, i, j] else 0.0
        total, err = two_sum(total, z[j])
        comp += err
    return total + comp


@numba.njit(cache=True, fastmath=False, inline="always")
def _row_mix(bi, g, end, z, values, total, out, os, oc):
    """out[x] = dot2(z, values[bi, :, g, x]) / total for every x (the weighted values)."""
    d, K = values.shape[3], values.shape[1]
    for x in range(d):
        os[x] = 0.0
        oc[x] = 0.0
    for j in range(end):  # dot2(z, values[bi, :, g, x]) for every x at once
        _add_terms(z[j], values[bi, j, g], d, os, oc)
    for x in range(d):
        if os[x] == 0.0:
            # the terms past ``end`` (z = +0) leave s + c unchanged when s != 0; a zero s
            # takes them as dot2 does, for the sign of a zero result
            for j in range(end, K):
                p, err = two_prod(z[j], values[bi, j, g, x])
                t, f = two_sum(os[x], p)
                os[x] = t
                oc[x] += err + f
        out[x] = (os[x] + oc[x]) / total


@numba.njit(cache=True, fastmath=False, inline="always")
def _row_scratch(K, d):
    """One worker's scratch for a row: z, zs, zc [K] (logits, Dot2 sums) and os, oc [d]."""
    return np.empty(K), np.empty(K), np.empty(K), np.empty(d), np.empty(d)


@numba.njit(cache=True, fastmath=False, inline="always")
def _attend_row(bi, i, q, keys_t, values, bias, vis, scale, group, out, z, zs, zc, os, oc):
    hq, d = q.shape[2], q.shape[3]
    end = _visible_end(bi, i, vis)
    for h in range(hq):
        g = h // group
        total = _row_exp(bi, i, h, g, end, q, keys_t, bias, vis, scale, z, zs, zc)
        if total == 0.0:
            for x in range(d):
                out[bi, i, h, x] = 0.0
            continue
        _row_mix(bi, g, end, z, values, total, out[bi, i, h], os, oc)


@numba.njit(cache=True, fastmath=False, parallel=True)
def attend_kernel(q, keys_t, values, bias, vis, scale, group, out):
    b, s = q.shape[0], q.shape[1]
    d = q.shape[3]
    K = keys_t.shape[3]
    half = (s + 1) // 2
    for t in numba.prange(b * half):  # rows i and s-1-i together: causal rows cost ~ i
        bi, r = t // half, t % half
        z, zs, zc, os, oc = _row_scratch(K, d)
        _attend_row(bi, r, q, keys_t, values, bias, vis, scale, group, out, z, zs, zc, os, oc)
        if s - 1 - r != r:
            _attend_row(bi, s - 1 - r, q, keys_t, values, bias, vis, scale, group, out, z, zs, zc, os, oc)


# ---- the backward (reference/attention/backward.py) ----------------------------------------


@numba.njit(cache=True, fastmath=False, inline="always")
def _backward_row(bi, i, q, keys, keys_t, values, values_t, bias, vis, dO, scale, group, o, p, dS, dQ,
                  z, zs, zc, os, oc):
    """Row i of every head: the weights p (as the forward: z / total), o (as ``attend``), dP_j =
    dot2(dO_hi, v_gj), delta = dot2(dO_hi, o_hi), dS_j = p_j (dP_j - delta) and dQ_hi = sum_j
    (dS_j scale) k_gj by Dot2; p and dS are 0 at the keys the row does not see."""
    hq, d = q.shape[2], q.shape[3]
    K = keys.shape[1]
    end = _visible_end(bi, i, vis)
    for h in range(hq):
        g = h // group
        total = _row_exp(bi, i, h, g, end, q, keys_t, bias, vis, scale, z, zs, zc)
        if total == 0.0:
            p[bi, h, i, :] = 0.0
            dS[bi, h, i, :] = 0.0
            o[bi, i, h, :] = 0.0
            dQ[bi, i, h, :] = 0.0
            continue
        _row_mix(bi, g, end, z, values, total, o[bi, i, h], os, oc)
        delta = dot2(dO[bi, i, h], o[bi, i, h])
        _dot2_rows(dO[bi, i, h], values_t[bi, g], d, end, zs, zc)  # dP_j = dot2(dO_hi, v_gj)
        for j in range(K):
            if j < end and vis[bi, i, j]:
                w = z[j] / total
                ds = w * ((zs[j] + zc[j]) - delta)
            else:
                w, ds = 0.0, 0.0
            p[bi, h, i, j] = w
            dS[bi, h, i, j] = ds
            z[j] = ds * scale  # dZ
        for x in range(d):
            os[x] = 0.0
            oc[x] = 0.0
        for j in range(end):  # dQ[x] = dot2(dZ, keys[bi, :, g, x]) for every x at once
            _add_terms(z[j], keys[bi, j, g], d, os, oc)
        for x in range(d):
            dQ[bi, i, h, x] = os[x] + oc[x]


@numba.njit(cache=True, fastmath=False, parallel=True)
def softmax_backward_kernel(q, keys, keys_t, values, values_t, bias, vis, dO, scale, group, o, p, dS, dQ):
    b, s = q.shape[0], q.shape[1]
    d = q.shape[3]
    K = keys.shape[1]
    half = (s + 1) // 2
    for t in numba.prange(b * half):  # rows i and s-1-i together: causal rows cost ~ i
        bi, r = t // half, t % half
        z, zs, zc, os, oc = _row_scratch(K, d)
        _backward_row(bi, r, q, keys, keys_t, values, values_t, bias, vis, dO, scale, group, o, p, dS, dQ,
                      z, zs, zc, os, oc)
        if s - 1 - r != r:
            _backward_row(bi, s - 1 - r, q, keys, keys_t, values, values_t, bias, vis, dO, scale, group, o, p,
                          dS, dQ, z, zs, zc, os, oc)


@numba.njit(cache=True, fastmath=False, inline="always")
def _backward_column(bi, n, q, dO, p, dS, vis, scale, group, past, dK, dV, ks, kc, vs, vc):
    """New token n (key slot past + n), every kv head g: dK_gn = sum_{h in g} sum_i (dS_hij scale)
    q_hi and dV_gn = sum_{h in g} sum_i p_hij dO_hi by Dot2, the terms in the order (h, i)."""
    s, d = q.shape[1], q.shape[3]
    j = past + n
    for g in range(dK.shape[2]):
        for x in range(d):
            ks[x] = 0.0
            kc[x] = 0.0
            vs[x] = 0.0
            vc[x] = 0.0
        for h in range(g * group, (g + 1) * group):
            for i in range(s):
                if vis[bi, i, j]:
                    _add_terms(dS[bi, h, i, j] * scale, q[bi, i, h], d, ks, kc)
                    _add_terms(p[bi, h, i, j], dO[bi, i, h], d, vs, vc)
        for x in range(d):
            dK[bi, n, g, x] = ks[x] + kc[x]
            dV[bi, n, g, x] = vs[x] + vc[x]


@numba.njit(cache=True, fastmath=False, parallel=True)
def key_value_backward_kernel(q, dO, p, dS, vis, scale, group, past, dK, dV):
    b, s, d = q.shape[0], q.shape[1], q.shape[3]
    half = (s + 1) // 2
    for t in numba.prange(b * half):  # tokens n and s-1-n together: causal columns cost ~ s - n
        bi, r = t // half, t % half
        ks = np.empty(d)
        kc = np.empty(d)
        vs = np.empty(d)
        vc = np.empty(d)
        _backward_column(bi, r, q, dO, p, dS, vis, scale, group, past, dK, dV, ks, kc, vs, vc)
        if s - 1 - r != r:
            _backward_column(bi, s - 1 - r, q, dO, p, dS, vis, scale, group, past, dK, dV, ks, kc, vs, vc)


@numba.njit(cache=True, fastmath=False)
def t5_scatter_kernel(dS, buckets, vis, out):
    """out[t, h] = sum of dS[bi, h, i, j] over the visible (bi, i, j) with bucket t, plain float64
    in the order (bi, i, j): np.add.at's order in backward.t5_scatter."""
    b, hq, s, K = dS.shape
    for bi in range(b):
        for i in range(s):
            for j in range(K):
                if vis[bi, i, j]:
                    t = buckets[bi, i, j]
                    for h in range(hq):
                        out[t, h] += dS[bi, h, i, j]


# below this many multiply-adds a kernel runs on the calling thread: a parallel region waits for
# every worker to be scheduled, up to a time slice on a busy machine (reference.numerics.cpu_kernels)
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


def softmax_backward(q, keys, values, bias, vis, dO, scale, group):
    """(o [b, s, hq, d], p [b, hq, s, K], dS [b, hq, s, K], dQ [b, s, hq, d]) from q, dO [b, s, hq,
    d], keys/values [b, K, hkv, d], bias [b, hq, s, K], vis bool [b, s, K] (_backward_row)."""
    b, s, hq, d = q.shape
    K = keys.shape[1]
    o, dQ = np.zeros(q.shape), np.zeros(q.shape)
    p, dS = np.zeros((b, hq, s, K)), np.zeros((b, hq, s, K))
    if o.size == 0 or K == 0:
        return o, p, dS, dQ
    a = np.ascontiguousarray
    keys_t, values_t = (a(np.transpose(x, (0, 2, 3, 1))) for x in (keys, values))  # [b, hkv, d, K]
    _run(softmax_backward_kernel, 4 * b * s * hq * K * d, a(q), a(keys), keys_t, a(values), values_t, a(bias),
         a(vis), a(dO), float(scale), int(group), o, p, dS, dQ)
    return o, p, dS, dQ


def key_value_backward(q, dO, p, dS, vis, scale, group, past, num_kv_heads):
    """(dK, dV) [b, s, hkv, d] of the new tokens' keys and values (_backward_column)."""
    b, s, hq, d = q.shape
    dK, dV = np.zeros((b, s, num_kv_heads, d)), np.zeros((b, s, num_kv_heads, d))
    if dK.size:
        a = np.ascontiguousarray
        _run(key_value_backward_kernel, 2 * b * s * hq * s * d, a(q), a(dO), a(p), a(dS), a(vis), float(scale),
             int(group), int(past), dK, dV)
    return dK, dV


def t5_scatter(dS, buckets, vis, num_buckets) -> np.ndarray:
    """[num_buckets, hq]: dS [b, hq, s, K] summed by bucket [b, s, K] over the visible entries."""
    out = np.zeros((num_buckets, dS.shape[1]))
    a = np.ascontiguousarray
    t5_scatter_kernel(a(dS), a(buckets, dtype=np.int64), a(vis), out)
    return out
