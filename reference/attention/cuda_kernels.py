"""numba.cuda kernels of the attention forward and backward (backend "cuda"): the CPU kernels'
algorithms.

``project_kernel``: one thread per output element (grid-stride), a Dot2 dot product with the
product's error taken exactly by ``cuda.fma`` (a*b - p is exact in one FMA), and Knuth's TwoSum.
Every product p is ``libdevice.dmul_rn``, which NVVM never contracts into an FMA with the sum
that follows (its default contraction would break the error-free transformation).
``attend_kernel``: one thread per (batch, query, head) row: Dot2 logits, the row maximum, exp
(libdevice, < 1 ulp), a compensated denominator and Dot2 for the weighted values; ``scratch``
holds each row's exponentials. The compiler may contract ``dot * scale + bias`` into one FMA,
so results agree with the CPU kernels within a few ulps, not bit for bit.

The backward (reference/attention/backward.py): ``softmax_backward_kernel``, one thread per row
(bi, i, h), recomputes the row's weights and o as ``attend_kernel`` and writes p, dS;
``query_backward_kernel`` (one thread per element of dQr, the keys j in order) and
``key_value_backward_kernel`` (one per element of the new tokens' dKr and dV, the group's heads
then the queries in order) are Dot2; ``t5_scatter_kernel``, one thread per table entry, adds the
entry's dS in the cpu kernel's order. Each thread owns its outputs: no atomics, deterministic.

``PTX_SIGNATURES`` lists the kernels with the signatures the wrappers launch them at."""

import math

import numpy as np
from numba import boolean, config, cuda, float64, int64
from numba.cuda import libdevice

from reference.numerics.cuda_launch import THREADS_PER_BLOCK, blocks, check_device, to_device


def _plain_mul(a, b):
    return a * b


# The simulator runs kernels as Python, where libdevice stubs have no body.
_mul = _plain_mul if config.ENABLE_CUDASIM else libdevice.dmul_rn


@cuda.jit(device=True)
def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@cuda.jit(device=True)
def _add_term(s, c, x, y):
    """One Dot2 step: the sum s and its compensation c take the term x y (its product's error exact
    by one FMA)."""
    p = _mul(x, y)
    e = cuda.fma(x, y, -p)
    s, f = _two_sum(s, p)
    return s, c + (e + f)


@cuda.jit(device=True)
def _dot_rows(x, y):
    """Dot2 of two 1-D arrays of equal length."""
    s, c = 0.0, 0.0
    for k in range(x.shape[0]):
        s, c = _add_term(s, c, x[k], y[k])
    return s + c


@cuda.jit(device=True)
def _unravel(t, n1, n2, n3):
    """(a, i, j, k) with t = ((a n1 + i) n2 + j) n3 + k: a thread's element of a C-order 4-D array."""
    a = t // (n1 * n2 * n3)
    rest = t - a * n1 * n2 * n3
    i = rest // (n2 * n3)
    rest -= i * n2 * n3
    j = rest // n3
    return a, i, j, rest - j * n3


def project_kernel(a, w, out):
    n, m = out.shape[0], out.shape[1]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, n * m, stride):
        i = t // m
        j = t - i * m
        out[i, j] = _dot_rows(a[i], w[j])


@cuda.jit(device=True)
def _row_exp(bi, i, h, g, q, keys, bias, vis, scale, z):
    """z[j] <- exp(z_j - max z), z_j = dot2(q_hi, k_gj) scale + b_hij, for row (bi, i, h) (0 where
    key j is not visible); returns their compensated sum, or 0 for a row that sees no key."""
    K = keys.shape[1]
    top = -math.inf
    for j in range(K):
        if vis[bi, i, j]:
            z[j] = _dot_rows(q[bi, i, h], keys[bi, j, g]) * scale + bias[bi, h, i, j]
            top = max(top, z[j])
    if top == -math.inf:
        return 0.0
    total, comp = 0.0, 0.0
    for j in range(K):
        z[j] = math.exp(z[j] - top) if vis[bi, i, j] else 0.0
        total, e = _two_sum(total, z[j])
        comp += e
    return total + comp


@cuda.jit(device=True)
def _row_mix(bi, g, z, values, total, out):
    """out[x] = dot2(z, values[bi, :, g, x]) / total for every x (the weighted values)."""
    K, d = values.shape[1], values.shape[3]
    for x in range(d):
        acc, c = 0.0, 0.0
        for j in range(K):
            acc, c = _add_term(acc, c, z[j], values[bi, j, g, x])
        out[x] = (acc + c) / total


def attend_kernel(q, keys, values, bias, vis, scale, group, scratch, out):
    b, s, hq, d = q.shape[0], q.shape[1], q.shape[2], q.shape[3]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, b * s * hq, stride):
        bi, i, h, _ = _unravel(t, s, hq, 1)
        g = h // group
        total = _row_exp(bi, i, h, g, q, keys, bias, vis, scale, scratch[t])
        if total == 0.0:
            for x in range(d):
                out[bi, i, h, x] = 0.0
            continue
        _row_mix(bi, g, scratch[t], values, total, out[bi, i, h])


# ---- the backward (reference/attention/backward.py) ----------------------------------------


def softmax_backward_kernel(q, keys, values, bias, vis, dO, scale, group, scratch, o, p, dS):
    """One thread per row (bi, i, h): the weights p = z / total, o (as attend_kernel), delta =
    dot2(dO_hi, o_hi) and dS_j = p_j (dot2(dO_hi, v_gj) - delta); p, dS 0 where not visible."""
    b, s, hq, d = q.shape[0], q.shape[1], q.shape[2], q.shape[3]
    K = keys.shape[1]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, b * s * hq, stride):
        bi, i, h, _ = _unravel(t, s, hq, 1)
        g = h // group
        z = scratch[t]
        total = _row_exp(bi, i, h, g, q, keys, bias, vis, scale, z)
        if total == 0.0:
            for x in range(d):
                o[bi, i, h, x] = 0.0
            for j in range(K):
                p[bi, h, i, j] = 0.0
                dS[bi, h, i, j] = 0.0
            continue
        _row_mix(bi, g, z, values, total, o[bi, i, h])
        delta = _dot_rows(dO[bi, i, h], o[bi, i, h])
        for j in range(K):
            w, ds = 0.0, 0.0
            if vis[bi, i, j]:
                w = z[j] / total
                ds = w * (_dot_rows(dO[bi, i, h], values[bi, j, g]) - delta)
            p[bi, h, i, j] = w
            dS[bi, h, i, j] = ds


def query_backward_kernel(dS, keys, vis, scale, group, dQ):
    """One thread per element (bi, i, h, x): dQ = sum_j (dS_hij scale) k_gjx by Dot2, j ascending."""
    b, s, hq, d = dQ.shape[0], dQ.shape[1], dQ.shape[2], dQ.shape[3]
    K = keys.shape[1]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, b * s * hq * d, stride):
        bi, i, h, x = _unravel(t, s, hq, d)
        g = h // group
        acc, c = 0.0, 0.0
        for j in range(K):
            if vis[bi, i, j]:
                acc, c = _add_term(acc, c, _mul(dS[bi, h, i, j], scale), keys[bi, j, g, x])
        dQ[bi, i, h, x] = acc + c


def key_value_backward_kernel(dS, p, q, dO, vis, scale, group, past, dK, dV):
    """One thread per element (bi, n, g, x) of the new tokens' dK, dV: sum over h in g, then i, of
    (dS_hij scale) q_hix and p_hij dO_hix by Dot2 (key slot j = past + n)."""
    b, s, hkv, d = dK.shape[0], dK.shape[1], dK.shape[2], dK.shape[3]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, b * s * hkv * d, stride):
        bi, n, g, x = _unravel(t, s, hkv, d)
        j = past + n
        ks, kc, vs, vc = 0.0, 0.0, 0.0, 0.0
        for h in range(g * group, (g + 1) * group):
            for i in range(s):
                if vis[bi, i, j]:
                    ks, kc = _add_term(ks, kc, _mul(dS[bi, h, i, j], scale), q[bi, i, h, x])
                    vs, vc = _add_term(vs, vc, p[bi, h, i, j], dO[bi, i, h, x])
        dK[bi, n, g, x] = ks + kc
        dV[bi, n, g, x] = vs + vc


def t5_scatter_kernel(dS, buckets, vis, out):
    """One thread per table entry (t, h): the sum of dS[bi, h, i, j] over the visible (bi, i, j)
    in bucket t, plain float64 in the order (bi, i, j), as the cpu kernel (no atomics)."""
    nb, hq = out.shape[0], out.shape[1]
    b, s, K = vis.shape[0], vis.shape[1], vis.shape[2]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, nb * hq, stride):
        tb = t // hq
        h = t - tb * hq
        acc = 0.0
        for bi in range(b):
            for i in range(s):
                for j in range(K):
                    if vis[bi, i, j] and buckets[bi, i, j] == tb:
                        acc += dS[bi, h, i, j]
        out[tb, h] = acc


_F4 = float64[:, :, :, ::1]
_B3 = boolean[:, :, ::1]
PTX_SIGNATURES = [
    (project_kernel, (float64[:, ::1], float64[:, ::1], float64[:, ::1])),
    (attend_kernel, (_F4, _F4, _F4, _F4, _B3, float64, int64, float64[:, ::1], _F4)),
    (softmax_backward_kernel, (_F4, _F4, _F4, _F4, _B3, _F4, float64, int64, float64[:, ::1], _F4, _F4, _F4)),
    (query_backward_kernel, (_F4, _F4, _B3, float64, int64, _F4)),
    (key_value_backward_kernel, (_F4, _F4, _F4, _F4, _B3, float64, int64, int64, _F4, _F4)),
    (t5_scatter_kernel, (_F4, int64[:, :, ::1], _B3, float64[:, ::1])),
]
_project_jit = cuda.jit(project_kernel)
_attend_jit = cuda.jit(attend_kernel)
_softmax_backward_jit = cuda.jit(softmax_backward_kernel)
_query_backward_jit = cuda.jit(query_backward_kernel)
_key_value_backward_jit = cuda.jit(key_value_backward_kernel)
_t5_scatter_jit = cuda.jit(t5_scatter_kernel)


def project(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """a [n, k] @ w [m, k]^T by Dot2 -> [n, m]."""
    check_device()
    out = np.empty((a.shape[0], w.shape[0]))
    if out.size == 0:
        return out
    d_out = cuda.to_device(out)
    _project_jit[blocks(out.size), THREADS_PER_BLOCK](to_device(a), to_device(w), d_out)
    return d_out.copy_to_host()


def attend(q, keys, values, bias, vis, scale, group) -> np.ndarray:
    """As cpu_kernels.attend."""
    check_device()
    out = np.empty(q.shape)
    rows = q.shape[0] * q.shape[1] * q.shape[2]
    if out.size == 0:
        return out
    d_out = cuda.to_device(out)
    scratch = cuda.device_array((rows, max(1, keys.shape[1])))
    _attend_jit[blocks(rows), THREADS_PER_BLOCK](to_device(q), to_device(keys), to_device(values), to_device(bias),
                                                  to_device(vis), float(scale), int(group), scratch, d_out)
    return d_out.copy_to_host()


def softmax_backward(q, keys, values, bias, vis, dO, scale, group):
    """As cpu_kernels.softmax_backward: (o, p, dS, dQ)."""
    check_device()
    b, s, hq, d = q.shape
    K = keys.shape[1]
    if q.size == 0 or K == 0:
        return np.zeros(q.shape), np.zeros((b, hq, s, K)), np.zeros((b, hq, s, K)), np.zeros(q.shape)
    o, p = cuda.device_array(q.shape), cuda.device_array((b, hq, s, K))
    dS, dQ = cuda.device_array((b, hq, s, K)), cuda.device_array(q.shape)
    rows = b * s * hq
    d_keys, d_vis = to_device(keys), to_device(vis)
    scratch = cuda.device_array((rows, K))
    _softmax_backward_jit[blocks(rows), THREADS_PER_BLOCK](to_device(q), d_keys, to_device(values), to_device(bias),
                                                            d_vis, to_device(dO), float(scale), int(group), scratch,
                                                            o, p, dS)
    _query_backward_jit[blocks(dQ.size), THREADS_PER_BLOCK](dS, d_keys, d_vis, float(scale), int(group), dQ)
    return o.copy_to_host(), p.copy_to_host(), dS.copy_to_host(), dQ.copy_to_host()


def key_value_backward(q, dO, p, dS, vis, scale, group, past, num_kv_heads):
    """As cpu_kernels.key_value_backward: (dK, dV) of the new tokens."""
    check_device()
    b, s, hq, d = q.shape
    if b * s * num_kv_heads * d == 0:
        return np.zeros((b, s, num_kv_heads, d)), np.zeros((b, s, num_kv_heads, d))
    dK, dV = cuda.device_array((b, s, num_kv_heads, d)), cuda.device_array((b, s, num_kv_heads, d))
    _key_value_backward_jit[blocks(dK.size), THREADS_PER_BLOCK](to_device(dS), to_device(p), to_device(q),
                                                                 to_device(dO),
                                                                 to_device(vis), float(scale), int(group), int(past),
                                                                 dK, dV)
    return dK.copy_to_host(), dV.copy_to_host()


def t5_scatter(dS, buckets, vis, num_buckets) -> np.ndarray:
    """As cpu_kernels.t5_scatter: [num_buckets, hq]."""
    check_device()
    out = cuda.device_array((num_buckets, dS.shape[1]))
    _t5_scatter_jit[blocks(out.size), THREADS_PER_BLOCK](to_device(dS), to_device(np.asarray(buckets, dtype=np.int64)),
                                                          to_device(vis), out)
    return out.copy_to_host()
