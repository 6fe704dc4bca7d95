"""mpmath oracle for Gaussian-kernel RoPE: K(m) (R_m x), certifying the stored values.

The rotation is reference.rope.oracle's (mpmath from scratch, no float64 code); the kernel is
written out here again from seed document 002's formula, apart from core.kernel_mp.
"""

from __future__ import annotations

import mpmath
import numpy as np

from reference.numerics import rotation_oracle


def kernel_exact(m: int, kernel: dict):
    a1, a2, s1, s2 = (mpmath.mpf(float(kernel[k])) for k in ("a1", "a2", "s1", "s2"))
    sq = mpmath.mpf(int(m)) ** 2
    return a1 * mpmath.e ** (-sq / (2 * s1 ** 2)) + a2 * mpmath.e ** (-sq / (2 * s2 ** 2))


def apply_exact(x, positions, rotary_dim, base, layout, kernel, prec=rotation_oracle.PREC_BITS):
    """Object array of mpf, shaped like x: K(m) times the exact rotation (the tail scaled too)."""
    out = rotation_oracle.apply_exact(x, positions, rotary_dim, base, layout, prec=prec)
    pos = np.asarray(positions, dtype=np.int64)
    with mpmath.workprec(prec):
        for b, s in np.ndindex(pos.shape):
            k = kernel_exact(int(pos[b, s]), kernel)
            out[b, s] = [[k * v for v in row] for row in out[b, s]]
    return out


def score_exact(q, k, q_positions, k_positions, rotary_dim, base, layout, kernel, prec=rotation_oracle.PREC_BITS):
    """Object array of mpf [b, h, sq, sk]: K(n - m) <R_m q, R_n k>, both rotations exact (the
    oracle's own, not the reference's pairwise identity)."""
    qr = rotation_oracle.apply_exact(q, q_positions, rotary_dim, base, layout, prec=prec)
    kr = rotation_oracle.apply_exact(k, k_positions, rotary_dim, base, layout, prec=prec)
    qp, kp = np.asarray(q_positions), np.asarray(k_positions)
    nb, sq, nh, _ = qr.shape
    out = np.empty((nb, nh, sq, kr.shape[1]), dtype=object)
    with mpmath.workprec(prec):
        for b, h, i, j in np.ndindex(out.shape[0], nh, sq, kr.shape[1]):
            dot = mpmath.fsum(a * c for a, c in zip(qr[b, i, h], kr[b, j, h]))
            out[b, h, i, j] = kernel_exact(int(kp[b, j]) - int(qp[b, i]), kernel) * dot
    return out
