"""Numba @njit kernels of the FIRE bias and of its backward (backend "cpu"; the backward at the
end). Never fastmath: log1p, the division, and the hidden units summed in order, within
reference.fire.fast_bound.

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
def psi(a, y):
    """log1p(a y) for a, y >= 0; where a y overflows (then a, y >= 1) ln a + ln y, both terms
    non-negative and log1p(z) - ln z < 1/z < 2**-1024: within core.fast_bound's 3u per psi."""
    z = a * y
    if math.isinf(z):
        return math.log(a) + math.log(y)
    return math.log1p(z)


@numba.njit(cache=True, fastmath=False, inline="always")
def _row(i, qp, kp, c, L, eps, w1, b1, w2, b2, num, use_table, x, act, out):
    norm = psi(abs(c), max(float(qp[i]), L)) + eps
    sk = kp.shape[0]
    if use_table:
        for j in range(sk):
            x[j] = num[abs(qp[i] - kp[j])] / norm
    else:
        for j in range(sk):
            x[j] = psi(abs(c), float(abs(qp[i] - kp[j]))) / norm
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
        num[d] = psi(abs(c), float(d))
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
    numba.set_num_threads(1)  # small: on the calling thread (see reference.numerics.cpu_kernels)
    try:
        bias_kernel(*args)
    finally:
        numba.set_num_threads(threads)
    return out


# The backward (reference.fire.backward, backend "cpu"): one pass over the entries (i, j) in
# row-major order, each gradient accumulated in that order: the order of the CUDA kernels, whose
# threads each own one gradient element. Never parallel: the sums run over every entry.


@numba.njit(cache=True, fastmath=False, inline="always")
def entry_features(i, j, ac, sign_c, L, eps):
    """(x, dx/dc, dx/dL) at query position i and key position j: reference.fire.backward.features'
    expressions in their order, sign(0) = 0 in sign_c, dm/dL = 1, 1/2 at the tie i = L, 0."""
    q = float(i)
    n = float(abs(i - j))
    m = max(q, L)
    A = math.log1p(ac * n)
    D = math.log1p(ac * m) + eps
    dm_dL = 1.0 if L > q else (0.5 if L == q else 0.0)
    dx_dc = sign_c * (n / ((ac * n + 1) * D) - A * m / ((ac * m + 1) * D * D))
    return A / D, dx_dc, -A * ac / ((ac * m + 1) * D * D) * dm_dL


@numba.njit(cache=True, fastmath=False, inline="always")
def unit_delta(G, w2, i, j, k):
    """sum_h G[h, i, j] W2[h, k], h ascending: the cotangent reaching unit k's output."""
    acc = 0.0
    for h in range(w2.shape[0]):
        acc += G[h, i, j] * w2[h, k]
    return acc


@numba.njit(cache=True, fastmath=False)
def vjp_kernel(G, qp, kp, ac, sign_c, L, eps, w1, b1, w2, g_w1, g_b1, g_w2, g_b2, g_scalars):
    """The fast VJP's sums (reference.fire.backward): g_w1, g_b1 [hidden], g_w2 [H, hidden], g_b2 [H],
    g_scalars = [sum gx dx/dc, sum gx dx/dL]; relu'(0) = 0 (the mask is p > 0)."""
    g_w1[:] = 0.0
    g_b1[:] = 0.0
    g_w2[:] = 0.0
    g_b2[:] = 0.0
    g_scalars[:] = 0.0
    for i in range(qp.shape[0]):
        for j in range(kp.shape[0]):
            x, dx_dc, dx_dL = entry_features(qp[i], kp[j], ac, sign_c, L, eps)
            gx = 0.0
            for k in range(w1.shape[0]):
                p = w1[k] * x + b1[k]
                a = p if p > 0 else 0.0
                delta = unit_delta(G, w2, i, j, k) if p > 0 else 0.0
                for h in range(w2.shape[0]):
                    g_w2[h, k] += G[h, i, j] * a
                g_b1[k] += delta
                g_w1[k] += delta * x
                gx += delta * w1[k]
            for h in range(w2.shape[0]):
                g_b2[h] += G[h, i, j]
            g_scalars[0] += gx * dx_dc
            g_scalars[1] += gx * dx_dL


def bias_vjp(G, qp, kp, c, L, eps, w1, b1, w2, sign_lm, init_L) -> dict:
    """{role: gradient} (reference.fire.backward, fast mode) from validated float64 inputs, L =
    |L_multiplier init_L| as computed, w1 = W1[:, 0], sign_lm = sign(L_multiplier)."""
    a = np.ascontiguousarray
    heads, hidden = w2.shape
    out = {"W1": np.empty(hidden), "b1": np.empty(hidden), "W2": np.empty((heads, hidden)), "b2": np.empty(heads)}
    scalars = np.empty(2)
    vjp_kernel(a(G), a(qp), a(kp), abs(c), float(np.sign(c)), float(L), float(eps), a(w1), a(b1), a(w2),
               out["W1"], out["b1"], out["W2"], out["b2"], scalars)
    return {"c": np.array(scalars[0]), "L_multiplier": np.array(scalars[1] * sign_lm * init_L),
            "W1": out["W1"][:, None], "b1": out["b1"], "W2": out["W2"], "b2": out["b2"]}
