"""Gaussian-kernel RoPE's backward pass in float64: the VJPs of ``apply`` and ``score``.

apply. f(x, m) = K(m) R_m x is linear in x (K(m) is a number per token, seed document 002), with
Jacobian K(m) R_m on the pairs and K(m) I on the tail. Its transpose gives, for a cotangent g,

    grad_x = K(m) R_m^T g = K(m) R_{-m} g   (pairs),     grad_x = K(m) g   (tail).

K is even (K(-m) = K(m), it depends on m^2), so grad_x is exactly the forward at -m:
``apply_vjp`` calls ``reference.gaussian_rope.apply`` with the positions negated, and inherits its
modes (fast: the fast rotation times K rounded once; golden: each value the nearest double to the
exact product, subnormals and zeros of an underflowing K included).

score. S_ij = K(n_j - m_i) <R_{m_i} q_i, R_{n_j} k_j> per batch row and head (q [b, sq, h, d] at
m [b, sq], k [b, sk, h, d] at n [b, sk]; the tail enters as the plain product). S is bilinear:
with W_ij = G_ij K(n_j - m_i) for a cotangent G [b, h, sq, sk],

    grad_q_i = R_{-m_i} sum_j W_ij R_{n_j} k_j = sum_j W_ij R_{d_ij} k_j,
    grad_k_j = R_{-n_j} sum_i W_ij R_{m_i} q_i = sum_i W_ij R_{-d_ij} q_i,        d_ij = n_j - m_i,

(the kernel does not depend on q or k, so it enters only through W). ``score_vjp`` returns
(grad_q, grad_k) shaped like q and k.

fast: q and k rotated by the fast reference (reference.rope.apply), W = G K with K rounded once
from its exact value (``core.fast_kernel_values``, as apply's fast mode; on the host for every
backend), the sums over keys (queries) of W times the rotated vectors, then the outer rotation by
``reference.rope.backward.apply_vjp``. ``score_vjp_bound`` bounds its error per element, at every
distance (K normal, subnormal or 0) and every length: with S = sum_j |G_ij| K_ij ||k_j|| (n = sk
terms for grad_q; grad_k likewise over the queries),

    |fast - exact| <= 2 (n + 20) u S + 2^-1074 sum_j ((|G_ij| + 1) ||k_j|| + 1):

each rotation errs by at most 8u of its pair's norm (4 pair-ulps, reference/rope/ACCURACY.md),
K by u K plus half a subnormal, W and each product by one rounding (plus half a subnormal where
they underflow), the sum of n terms by gamma_{n-1} of the sum of their magnitudes (any order, with
or without FMA; Higham, 2nd ed., sec. 3.1), and the outer rotation adds its 8u and mixes the
errors of a pair's two sums (the factor 2); the 20 absorbs these constants, the second-order
terms and the rounding of S itself. tests/gaussian_rope test it against golden on every backend,
at distances where K is normal, subnormal and 0 and where K's exponent is large.
``backend`` picks where this runs, rotations and sums on the same backend:
- "numpy" (the default, as before the backend argument existed): rope's numpy twin and float64
  einsum (NumPy's own summation order);
- "cpu": rope's Numba kernels and cpu_kernels.weighted_sums (recursive summation in increasing
  j, resp. i, one rounded product and addition per term);
- "cuda": rope's cuda kernels and cuda_kernels.weighted_sums, one thread per output element
  looping over the terms in the CPU kernel's order, no atomics (deterministic); NVVM fuses each
  multiply-add into an FMA, so it may differ from "cpu" in the last bits, within the same bound.
RoPE's three backends rotate within its fast bound of each other, not bit for bit, so the
backends here agree within twice the fast bound, not bit for bit (tests/gaussian_rope).
golden: each gradient element the nearest double to the exact sum (Ziv's loop in mpmath on the
phase code's exact cos/sin of d theta_i: a reduction, returned correctly rounded). It runs on
the host whatever the backend (any valid backend is accepted).

Mutants for diagnosis: ``mutants`` (apply) gives backward-transposed (R_m), backward-layout,
backward-missing, backward-scale (K(m)^2 or no K in the backward). Never imports torch.
"""

from __future__ import annotations

import mpmath
import numpy as np

from reference.numerics import phase, rotation, rotation_backward
from reference.numerics.layouts import pair_indices
from reference.numerics.validate import (
    check_backend,
    check_base,
    check_layout,
    check_mode,
    check_positions,
    check_x,
    resolve_rotary_dim,
)

from .core import _factor, apply, check_kernel, fast_kernel_values
from .core import kernel as kernel_values

__all__ = ["apply_vjp", "score_vjp", "score_vjp_bound", "mutants"]


U = 2.0**-53


def apply_vjp(g, positions, *, kernel, rotary_dim=None, base=10000.0, layout="half", backend="cpu", mode="fast"):
    """grad_x = K(m) R_{-m} g (pairs), K(m) g (tail): the VJP of reference.gaussian_rope.apply.

    g [batch, seq, heads, head_dim] (any real dtype), positions int [batch, seq]; other arguments
    as apply. float64 shaped like g; equal bit for bit to apply(g, -positions) (K is even)."""
    cot = rotation_backward.check_cotangent(g)
    m = check_positions(positions, cot.shape[:2])
    return apply(cot, -m, kernel=kernel, rotary_dim=rotary_dim, base=base, layout=layout, backend=backend,
                 mode=mode)


def score_vjp(G, q, k, q_positions, k_positions, *, kernel, rotary_dim=None, base=10000.0, layout="half",
              mode="fast", backend="numpy"):
    """(grad_q, grad_k) of the score form for the cotangent G [batch, heads, sq, sk] (module
    docstring): float64 shaped like q and like k. backend ("numpy", "cpu", "cuda") is where fast
    mode rotates and sums; golden mode is the same host computation on every backend."""
    check_kernel(kernel)
    qx, kx = check_x(q), check_x(k)
    r = resolve_rotary_dim(rotary_dim, qx.shape[3])
    b = check_base(base)
    layout = check_layout(layout)
    qp = check_positions(q_positions, qx.shape[:2])
    kp = check_positions(k_positions, kx.shape[:2])
    if kx.shape[0] != qx.shape[0] or kx.shape[2:] != qx.shape[2:]:
        raise ValueError(f"k: shape {kx.shape} does not match q {qx.shape} (batch, heads, head_dim)")
    nb, sq, nh, d = qx.shape
    sk = kx.shape[1]
    cot = np.asarray(G)
    if cot.dtype.kind not in "fiu" or cot.shape != (nb, nh, sq, sk):
        raise ValueError(f"G: must be real of shape [batch, heads, sq, sk] = {(nb, nh, sq, sk)}, got {cot.shape}")
    cot = cot.astype(np.float64)
    mode = check_mode(mode)
    backend = check_backend(backend)
    dist = kp[:, None, :] - qp[:, :, None]  # n - m [b, sq, sk]
    if mode == "fast":
        kw = dict(rotary_dim=r, base=b, layout=layout, backend=backend)
        w = cot * _kernel_once(dist, kernel)[:, None]  # W [b, h, sq, sk]
        aq, ak = _weighted_sums(backend)(w, rotation.apply(qx, qp, **kw), rotation.apply(kx, kp, **kw))
        return rotation_backward.apply_vjp(aq, qp, **kw), rotation_backward.apply_vjp(ak, kp, **kw)
    table = phase.ladder(r, b)
    first, second = pair_indices(r, layout)
    factor = _factor(kernel)
    grad_q = np.empty(qx.shape)
    grad_k = np.empty(kx.shape)
    for bi, h in np.ndindex(nb, nh):
        for i in range(sq):
            terms = [(cot[bi, h, i, j], int(dist[bi, i, j]), kx[bi, j, h]) for j in range(sk)]
            for e in range(d):
                grad_q[bi, i, h, e] = phase.settle(_gradient(terms, e, 1, table, first, second, r, factor))
        for j in range(sk):
            terms = [(cot[bi, h, i, j], int(dist[bi, i, j]), qx[bi, i, h]) for i in range(sq)]
            for e in range(d):
                grad_k[bi, j, h, e] = phase.settle(_gradient(terms, e, -1, table, first, second, r, factor))
    return grad_q, grad_k


def _kernel_once(dist, kernel) -> np.ndarray:
    """K at integer distances, each rounded once from its exact value (u K, or half a subnormal)."""
    return fast_kernel_values(dist.reshape(-1), kernel).reshape(dist.shape)


def score_vjp_bound(G, q, k, q_positions, k_positions, *, kernel) -> tuple[np.ndarray, np.ndarray]:
    """(bound_q [b, sq, h, 1], bound_k [b, sk, h, 1]): fast score_vjp's error bound per element of
    grad_q and grad_k on any backend (module docstring), broadcast over head_dim."""
    qx, kx = check_x(q), check_x(k)
    qp = check_positions(q_positions, qx.shape[:2])
    kp = check_positions(k_positions, kx.shape[:2])
    g = np.abs(np.asarray(G, dtype=np.float64))  # [b, h, sq, sk]
    w = g * _kernel_once(kp[:, None, :] - qp[:, :, None], kernel)[:, None]
    nq, nk = np.linalg.norm(qx, axis=-1), np.linalg.norm(kx, axis=-1)  # [b, s, h]
    tiny = 2.0**-1074

    def bound(weights, norms, floor, n):
        # weights [b, h, out, terms], norms [b, terms, h]: sums over the terms per output [b, out, h]
        s = np.einsum("bhot,bth->boh", weights, norms)
        a = np.einsum("bhot,bth->boh", floor + 1.0, norms) + n
        return (2 * (n + 20) * U * s + tiny * a)[..., None]

    return (bound(w, nk, g, kx.shape[1]),
            bound(np.swapaxes(w, 2, 3), nq, np.swapaxes(g, 2, 3), qx.shape[1]))


def _weighted_sums(backend):
    """weighted_sums(W, R q, R k) -> (sum_j W_ij (R k)_j, sum_i W_ij (R q)_i) on the backend; the
    kernel modules are imported on first use (importing this module compiles nothing)."""
    if backend == "numpy":
        return _einsum_sums
    if backend == "cpu":
        from . import cpu_kernels  # numba start-up: imported on first use

        return cpu_kernels.weighted_sums
    from . import cuda_kernels  # numba start-up: imported on first use

    return cuda_kernels.weighted_sums


def _einsum_sums(w, qr, kr):
    return np.einsum("bhij,bjhd->bihd", w, kr), np.einsum("bhij,bihd->bjhd", w, qr)


def _gradient(terms, e, sign, table, first, second, r, factor):
    """compute(prec) for Ziv's loop: sum over terms (G, d, v) of G K(d) (R_{sign d} v)[e], with an
    absolute error bound (each mpmath operation at prec bits, cos/sin within phase's bound)."""
    where = {int(j): (p, True) for p, j in enumerate(first)}
    where.update({int(j): (p, False) for p, j in enumerate(second)})
    pair, is_first = where.get(e, (None, None))

    def compute(prec):
        ulp = mpmath.mpf(2) ** (8 - prec)
        total, bound = mpmath.mpf(0), mpmath.mpf(0)
        for gv, dv, v in terms:
            if gv == 0:
                continue
            w = mpmath.mpf(float(gv)) * factor(prec, dv, None)
            if pair is None:  # the tail: the plain product
                val, err = mpmath.mpf(float(v[e])), mpmath.mpf(0)
            else:
                c, s, cs_err = phase.exact_cos_sin(table, dv, pair, prec)
                a, b = mpmath.mpf(float(v[first[pair]])), mpmath.mpf(float(v[second[pair]]))
                s = sign * s
                val = a * c - b * s if is_first else a * s + b * c
                err = (abs(a) + abs(b)) * cs_err
            total += w * val
            bound += abs(w) * (err + (abs(val) + 1) * ulp) * 2
        return total, bound + abs(total) * ulp

    return compute


def mutants(g, positions, *, kernel, rotary_dim=None, base=10000.0, layout="half", backend="numpy",
            mode="fast") -> dict:
    """{diagnosis code: [(description, wrong gradient)]} for apply's backward (see
    reference.rope.backward.mutants): R_m instead of R_{-m}, the other layout, no gradient, and the
    kernel missing from or squared in the backward."""
    cot = rotation_backward.check_cotangent(g)
    m = check_positions(positions, cot.shape[:2])
    kw = dict(kernel=kernel, rotary_dim=rotary_dim, base=base, backend=backend, mode=mode)
    layout = check_layout(layout)
    other = "interleaved" if layout == "half" else "half"
    right = apply_vjp(cot, m, layout=layout, **kw)
    kern = kernel_values(m, kernel)[:, :, None, None]
    # the rotation alone (RoPE's VJP leaves the tail as g, as a backward without K would)
    unscaled = rotation_backward.apply_vjp(cot, m, rotary_dim=rotary_dim, base=base, layout=layout, backend=backend,
                                       mode=mode)
    return {
        "backward-transposed": [("the gradient is rotated by R_m instead of R_{-m}",
                                 apply(cot, m, layout=layout, **kw))],
        "backward-layout": [(f"the gradient is paired in the {other} layout", apply_vjp(cot, m, layout=other, **kw))],
        "backward-missing": [("no gradient reaches x (zeros, or the output is detached)", np.zeros_like(cot))],
        "backward-scale": [("the kernel K(m) is missing from the backward", unscaled),
                           ("the kernel K(m) is applied twice in the backward", right * kern)],
    }
