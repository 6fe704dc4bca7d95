"""Transformer-XL score's backward pass in float64: the vector-Jacobian product of
``reference.transformer_xl.score`` with respect to each float input.

Formula. With s = 1/sqrt(d_head), a_i = q_i + u, b_i = q_i + v (per head), r_t = W R_t (head h's
slice: rows h d_head .. h d_head + d_head - 1 of r_weight = W) and t_ij = i + mlen - j capped at
clamp_len when clamp_len > 0, the score S_hij = s (a_i . k_j + b_i . r_(t_ij)) is bilinear:
linear in (q, u, v) for fixed (k, W) and in (k, W) for fixed (q, u, v). For a cotangent G
[n_head, qlen, klen] and Gs = s G, per head h and channel e:

    grad_q[i, e]    = sum_j Gs_ij (k_j[e] + r_(t_ij)[e])
    grad_u[e]       = sum_ij Gs_ij k_j[e]                   (u is added to every query)
    grad_v[e]       = sum_ij Gs_ij r_(t_ij)[e]
    grad_k[j, e]    = sum_i Gs_ij a_i[e]
    grad_W[o, c]    = sum_t A_t[o] R_t[c],   A_t[h d_head + e] = sum_{ij: t_ij = t} Gs_ij b_i[e]

(the position term is b . W R, so its W-gradient is the outer product of b with R, summed over
the pairs at each distance). Derived from sec. 3.3 of Dai et al., arXiv 1901.02860 (terms (a) to
(d)); G is used on every entry as given (the conformance side zeroes the masked ones).

Shapes: G [n_head, qlen, klen]; q [qlen, n_head, d_head]; k [klen, n_head, d_head]; u, v [n_head,
d_head]; r_weight [n_head * d_head, d_model]. ``score_vjp`` returns {"q", "k", "u", "v",
"r_weight"}, each shaped like its input.

Modes. fast: float64 on a backend, R from the shared sinusoid table's fast mode
(reference/numerics/sinusoid.py) on the same backend: "numpy" (the default: einsum, A_t by
np.add.at), "cpu" (Numba @njit kernels, cpu_kernels.py) or "cuda" (numba.cuda kernels,
cuda_kernels.py, one thread per gradient element summing its terms in the CPU kernels' fixed order:
deterministic); every backend within ``vjp_bound``. golden: every gradient element computed at 200
bits from the exact sinusoid and rounded once (a reduction: faithful, in practice correctly rounded
unless the terms cancel to 2^-140 of their size). ``score_jvp`` gives J dx = score(dq, k, du, dv, W)
+ score(q, dk, u, v, dW) (bilinearity), which the identity transformer_xl.backward-adjoint checks
against. Never imports torch.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np

from reference.golden.certify import nearest_double
from reference.numerics.validate import check_backend, check_mode

from .core import _distance_table, check_config, check_inputs, inv_freq_mp, score, sinusoid

ROLES = ("q", "k", "u", "v", "r_weight")
U = 2.0**-53

__all__ = ["ROLES", "score_jvp", "score_vjp", "vjp_bound"]


def check_cotangent(G, q, k) -> np.ndarray:
    """G float64 [n_head, qlen, klen], finite."""
    cot = np.asarray(G)
    shape = (q.shape[1], q.shape[0], k.shape[0])
    if cot.dtype.kind not in "fiu" or cot.shape != shape:
        raise ValueError(f"G: must be a real array of shape [n_head, qlen, klen] = {list(shape)}, "
                         f"got {cot.dtype} with shape {list(cot.shape)}")
    cot = cot.astype(np.float64)
    if not np.all(np.isfinite(cot)):
        raise ValueError("G: must hold finite numbers")
    return cot


def _checked(G, q, k, u, v, r_weight, mlen, d_model, clamp_len):
    mlen, d_model, clamp_len = check_config(mlen, d_model, clamp_len)
    q, k, u, v, w = check_inputs(q, k, u, v, r_weight, mlen, d_model)
    return check_cotangent(G, q, k), q, k, u, v, w, mlen, d_model, clamp_len


def score_vjp(G, q, k, u, v, r_weight, *, mlen, d_model, clamp_len=0, backend="numpy", mode="fast") -> dict:
    """{role: gradient} of sum_hij G_hij score_hij (module docstring), float64 like each input.
    backend ("numpy", "cpu", "cuda") picks the fast mode's implementation; golden mode is the
    mpmath computation on every backend."""
    G, q, k, u, v, w, mlen, d_model, clamp_len = _checked(G, q, k, u, v, r_weight, mlen, d_model, clamp_len)
    backend, mode = check_backend(backend), check_mode(mode)
    if mode == "golden":
        return _golden(G, q, k, u, v, w, mlen, d_model, clamp_len)
    values, index = _distance_table(q.shape[0], mlen, clamp_len)
    R = sinusoid(values, d_model, backend=backend)
    if backend == "numpy":
        return _numpy_vjp(G, q, k, u, v, w, R, index)
    if backend == "cpu":
        from . import cpu_kernels as kernels  # numba start-up: imported on first use
    else:
        from . import cuda_kernels as kernels  # numba start-up: imported on first use
    pairs, starts = pairs_by_distance(index, values.size)
    return kernels.score_vjp(G, q, k, u, v, w, R, index, pairs, starts, 1.0 / math.sqrt(q.shape[2]))


def pairs_by_distance(index, n_t) -> tuple[np.ndarray, np.ndarray]:
    """(pairs, starts) int64: the flat pair numbers i klen + j grouped by distance, ascending within
    each group; distance t's pairs are pairs[starts[t]:starts[t + 1]] (the kernels' order for A_t)."""
    flat = index.reshape(-1)
    pairs = np.argsort(flat, kind="stable").astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(np.bincount(flat, minlength=n_t))]).astype(np.int64)
    return pairs, starts


def _numpy_vjp(G, q, k, u, v, w, R, index) -> dict:
    """The fast VJP with NumPy (backend "numpy"): the module docstring's formulas as einsums."""
    qlen, n_head, d_head = q.shape
    r = (R @ w.T).reshape(-1, n_head, d_head)
    rk = r[index]  # [qlen, klen, n_head, d_head]
    gs = G * (1.0 / math.sqrt(d_head))
    A = np.zeros((R.shape[0], n_head, d_head))
    np.add.at(A, index, np.einsum("hij,ihe->ijhe", gs, q + v))
    return {
        "q": np.einsum("hij,jhe->ihe", gs, k) + np.einsum("hij,ijhe->ihe", gs, rk),
        "k": np.einsum("hij,ihe->jhe", gs, q + u),
        "u": np.einsum("hij,jhe->he", gs, k),
        "v": np.einsum("hij,ijhe->he", gs, rk),
        "r_weight": A.reshape(R.shape[0], n_head * d_head).T @ R,
    }


def _golden(G, q, k, u, v, w, mlen, d_model, clamp_len) -> dict:
    qlen, n_head, d_head = q.shape
    klen = k.shape[0]
    values, index = _distance_table(qlen, mlen, clamp_len)
    out = {"q": np.empty(q.shape), "k": np.empty(k.shape), "u": np.empty(u.shape), "v": np.empty(v.shape),
           "r_weight": np.empty(w.shape)}
    with mpmath.workprec(200):
        mp = np.vectorize(lambda x: mpmath.mpf(float(x)), otypes=[object])
        qm, km, um, vm, wm = mp(q), mp(k), mp(u), mp(v), mp(w)
        freq = inv_freq_mp(d_model)
        R = []
        for p in values.tolist():
            angles = [p * f for f in freq]
            R.append([mpmath.sin(a) for a in angles] + [mpmath.cos(a) for a in angles])
        r = [[mpmath.fdot(wm[o], row) for o in range(n_head * d_head)] for row in R]
        scale = 1 / mpmath.sqrt(d_head)
        nonzero = [(h, i, j, mpmath.mpf(float(G[h, i, j])) * scale)
                   for h in range(n_head) for i in range(qlen) for j in range(klen) if G[h, i, j] != 0]
        sums = {role: np.full(out[role].shape, mpmath.mpf(0), dtype=object) for role in ("q", "k", "u", "v")}
        A = [[mpmath.mpf(0)] * (n_head * d_head) for _ in values]
        # Exact products; the accumulation at 200 bits errs by at most 2^-190 of the terms' sum.
        for h, i, j, gs in nonzero:
            t = index[i, j]
            for e in range(d_head):
                rt = r[t][h * d_head + e]
                sums["q"][i, h, e] += gs * (km[j, h, e] + rt)
                sums["u"][h, e] += gs * km[j, h, e]
                sums["v"][h, e] += gs * rt
                sums["k"][j, h, e] += gs * (qm[i, h, e] + um[h, e])
                A[t][h * d_head + e] += gs * (qm[i, h, e] + vm[h, e])
        for role in ("q", "k", "u", "v"):
            flat = out[role].reshape(-1)
            for n, x in enumerate(sums[role].reshape(-1)):
                flat[n] = nearest_double(x)
        for o in range(n_head * d_head):
            for c in range(d_model):
                out["r_weight"][o, c] = nearest_double(mpmath.fsum(A[t][o] * R[t][c] for t in range(len(values))))
    return out


def score_jvp(dq, dk, du, dv, dr_weight, q, k, u, v, r_weight, *, mlen, d_model, clamp_len=0, backend="cpu"):
    """J dx [n_head, qlen, klen] for the direction (dq, dk, du, dv, dr_weight): by bilinearity,
    score(dq, k, du, dv, W) + score(q, dk, u, v, dW) (fast mode, the given backend)."""
    kw = dict(mlen=mlen, d_model=d_model, clamp_len=clamp_len, backend=backend)
    return score(dq, k, du, dv, r_weight, **kw) + score(q, dk, u, v, dr_weight, **kw)


def vjp_bound(G, q, k, u, v, r_weight, *, mlen, d_model, clamp_len=0) -> dict:
    """{role: per-element bound} on |fast score_vjp - exact|, u = 2^-53, first order:

        K u M_role,   K = n_pairs + n_t + d_model + 10,

    n_pairs = qlen klen, n_t the number of distinct distances, and M_role the sum of |terms| with
    rabs_e = sum_c |W_ec| |R_c| for |r_e|: M_q = sum_j |Gs| (|k_e| + rabs_e), M_u = sum_ij |Gs| |k_e|,
    M_v = sum_ij |Gs| rabs_e, M_k = sum_i |Gs| (|q_e| + |u_e|), M_W = sum_ij |Gs| (|q_e| + |v_e|) |R_t[c]|.
    Counts: s = 1/sqrt(d_head) (sqrt and division, 2u) and Gs (u); R within 1.5 ulp (3u), r = W R
    (d_model - 1 sums and d_model products, plus R's 3u); each sum over j (klen - 1), over (i, j)
    (n_pairs - 1) or over t (n_t - 1) in any order (recursive summation, Higham sec. 4.2); the
    products (u each, at most 2 per term), q + u / q + v (u), grad_q's two einsums added (u). The
    longest chain (grad_W: Gs 3, b 1, product 1, n_pairs - 1, R 3, product 1, n_t - 1) is n_pairs +
    n_t + 7, grad_v's is n_pairs + d_model + 7: K covers every role. The kernels (backend "cpu",
    "cuda") sum grad_q as sum_j Gs (k_e + r_e): the addition k + r (u) takes the place of the
    addition of the two einsums, so the chain (Gs 3, r d_model + 3, the sum 1, the product 1, klen
    - 1) stays below K; the others have the counts above in a fixed order, and the GPU's fma
    contraction (one rounding for a product and a sum) only removes roundings."""
    G, q, k, u_, v_, w, mlen, d_model, clamp_len = _checked(G, q, k, u, v, r_weight, mlen, d_model, clamp_len)
    qlen, n_head, d_head = q.shape
    values, index = _distance_table(qlen, mlen, clamp_len)
    R = np.abs(sinusoid(values, d_model, backend="numpy"))
    rabs = (R @ np.abs(w).T).reshape(-1, n_head, d_head)[index]  # [qlen, klen, n_head, d_head]
    gs = np.abs(G) / math.sqrt(d_head)
    K = (qlen * k.shape[0] + values.size + d_model + 10) * U
    A = np.zeros((values.size, n_head, d_head))
    np.add.at(A, index, np.einsum("hij,ihe->ijhe", gs, np.abs(q) + np.abs(v_)))
    return {
        "q": K * (np.einsum("hij,jhe->ihe", gs, np.abs(k)) + np.einsum("hij,ijhe->ihe", gs, rabs)),
        "k": K * np.einsum("hij,ihe->jhe", gs, np.abs(q) + np.abs(u_)),
        "u": K * np.einsum("hij,jhe->he", gs, np.abs(k)),
        "v": K * np.einsum("hij,ijhe->he", gs, rabs),
        "r_weight": K * (A.reshape(values.size, n_head * d_head).T @ R),
    }
