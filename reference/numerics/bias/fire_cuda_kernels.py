"""numba.cuda kernel of the FIRE bias (backend "cuda"), one thread per element (grid-stride): the
CPU kernel's operations in its order (libdevice log1p), within reference.fire.fast_bound.

The backward (reference.fire.backward, backend "cuda"), deterministic, no atomics: entry_kernel
has one thread per entry (i, j) (the feature x and the terms gx dx/dc, gx dx/dL of the c and
L_multiplier gradients), param_kernel one thread per gradient element, summing its terms over
the entries in row-major order, the CPU kernel's order. NVVM contracts multiply-adds into fma,
which only removes roundings: the results stay within reference.fire.backward.vjp_bound.

``PTX_SIGNATURES`` lists each kernel with the signature the wrapper launches it at."""

import math

import numpy as np
from numba import cuda, float64, int64

from reference.numerics.cuda_launch import THREADS_PER_BLOCK, blocks, check_device, to_device


def bias_kernel(qp, kp, c, L, eps, w1, b1, w2, b2, out):
    nh, sq, sk = out.shape[0], out.shape[1], out.shape[2]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, nh * sq * sk, stride):
        h = t // (sq * sk)
        rest = t - h * sq * sk
        i = rest // sk
        j = rest - i * sk
        d = qp[i] - kp[j]
        if d < 0:
            d = -d
        # psi(y) = log1p(|c| y), as ln |c| + ln y where |c| y overflows (fire_cpu_kernels.psi, written out)
        y = abs(c) * max(float(qp[i]), L)
        norm = (math.log(abs(c)) + math.log(max(float(qp[i]), L)) if math.isinf(y) else math.log1p(y)) + eps
        y = abs(c) * float(d)
        x = (math.log(abs(c)) + math.log(float(d)) if math.isinf(y) else math.log1p(y)) / norm
        acc = b2[h]
        for k in range(w1.shape[0]):
            acc += w2[h, k] * max(w1[k] * x + b1[k], 0.0)
        out[h, i, j] = acc


def entry_kernel(G, qp, kp, ac, sign_c, L, eps, w1, b1, w2, x, terms):
    """x[i, j] and terms[0 | 1, i, j] = gx dx/dc | gx dx/dL, gx = sum_k [p_k > 0] delta_k W1_k with
    k and, in delta_k = sum_h G W2_hk, h ascending: fire_cpu_kernels.entry_features and vjp_kernel's
    operations in their order (written out: a device function would need a device to compile)."""
    sq, sk = x.shape[0], x.shape[1]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, sq * sk, stride):
        i = t // sk
        j = t - i * sk
        q = float64(qp[i])
        n = float64(abs(qp[i] - kp[j]))
        m = max(q, L)
        A = math.log1p(ac * n)
        D = math.log1p(ac * m) + eps
        dm_dL = 1.0 if L > q else (0.5 if L == q else 0.0)
        xv = A / D
        gx = 0.0
        for k in range(w1.shape[0]):
            if w1[k] * xv + b1[k] > 0:
                delta = 0.0
                for h in range(w2.shape[0]):
                    delta += G[h, i, j] * w2[h, k]
                gx += delta * w1[k]
        x[i, j] = xv
        terms[0, i, j] = gx * (sign_c * (n / ((ac * n + 1) * D) - A * m / ((ac * m + 1) * D * D)))
        terms[1, i, j] = gx * (-A * ac / ((ac * m + 1) * D * D) * dm_dL)


def param_kernel(G, x, terms, w1, b1, w2, out):
    """out = [sum gx dx/dc, sum gx dx/dL, grad W1 (hidden), grad b1 (hidden), grad W2 (H x hidden,
    row-major), grad b2 (H)], each a sum over the entries (i, j) in row-major order; relu'(0) = 0."""
    heads, hidden = w2.shape[0], w2.shape[1]
    sq, sk = x.shape[0], x.shape[1]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for t in range(start, 2 + 2 * hidden + heads * hidden + heads, stride):
        acc = 0.0
        for i in range(sq):
            for j in range(sk):
                if t < 2:
                    acc += terms[t, i, j]
                elif t < 2 + 2 * hidden:
                    k = (t - 2) % hidden
                    delta = 0.0
                    if w1[k] * x[i, j] + b1[k] > 0:
                        for h in range(heads):
                            delta += G[h, i, j] * w2[h, k]
                    acc += delta * x[i, j] if t < 2 + hidden else delta
                elif t < 2 + 2 * hidden + heads * hidden:
                    h = (t - 2 - 2 * hidden) // hidden
                    k = (t - 2 - 2 * hidden) % hidden
                    acc += G[h, i, j] * max(w1[k] * x[i, j] + b1[k], 0.0)
                else:
                    acc += G[t - 2 - 2 * hidden - heads * hidden, i, j]
        out[t] = acc


_F1, _I1 = float64[::1], int64[::1]
PTX_SIGNATURES = [
    (bias_kernel, (_I1, _I1, float64, float64, float64, _F1, _F1, float64[:, ::1], _F1, float64[:, :, ::1])),
    (entry_kernel, (float64[:, :, ::1], _I1, _I1, float64, float64, float64, float64, _F1, _F1, float64[:, ::1],
                    float64[:, ::1], float64[:, :, ::1])),
    (param_kernel, (float64[:, :, ::1], float64[:, ::1], float64[:, :, ::1], _F1, _F1, float64[:, ::1], _F1)),
]
_bias_jit = cuda.jit(bias_kernel)
_entry_jit = cuda.jit(entry_kernel)
_param_jit = cuda.jit(param_kernel)


def bias(qp, kp, c, L, eps, w1, b1, w2, b2) -> np.ndarray:
    check_device()
    out = np.empty((w2.shape[0], qp.shape[0], kp.shape[0]))
    if out.size == 0:
        return out
    d_out = cuda.to_device(out)
    _bias_jit[blocks(out.size), THREADS_PER_BLOCK](to_device(qp), to_device(kp), float(c), float(L), float(eps),
                                                   to_device(w1), to_device(b1), to_device(w2), to_device(b2), d_out)
    return d_out.copy_to_host()


def bias_vjp(G, qp, kp, c, L, eps, w1, b1, w2, sign_lm, init_L) -> dict:
    """{role: gradient} (reference.fire.backward, fast mode) from validated float64 inputs, L =
    |L_multiplier init_L| as computed, w1 = W1[:, 0], sign_lm = sign(L_multiplier)."""
    check_device()
    heads, hidden = w2.shape
    sq, sk = qp.shape[0], kp.shape[0]
    flat = np.zeros(2 + 2 * hidden + heads * hidden + heads)
    if sq * sk:  # no entry: every sum is 0
        G_d, w1_d, b1_d, w2_d = to_device(G), to_device(w1), to_device(b1), to_device(w2)
        x = cuda.device_array((sq, sk), dtype=np.float64)
        terms = cuda.device_array((2, sq, sk), dtype=np.float64)
        _entry_jit[blocks(sq * sk), THREADS_PER_BLOCK](G_d, to_device(qp), to_device(kp), abs(c), float(np.sign(c)),
                                                       float(L), float(eps), w1_d, b1_d, w2_d, x, terms)
        out = cuda.to_device(flat)
        _param_jit[blocks(flat.size), THREADS_PER_BLOCK](G_d, x, terms, w1_d, b1_d, w2_d, out)
        flat = out.copy_to_host()
    w1_end, b1_end = 2 + hidden, 2 + 2 * hidden
    return {"c": np.array(flat[0]), "L_multiplier": np.array(flat[1] * sign_lm * init_L),
            "W1": flat[2:w1_end, None], "b1": flat[w1_end:b1_end],
            "W2": flat[b1_end:b1_end + heads * hidden].reshape(heads, hidden), "b2": flat[b1_end + heads * hidden:]}
