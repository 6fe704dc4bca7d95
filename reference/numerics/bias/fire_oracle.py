"""mpmath oracle for FIRE, written again from the formula (no code shared with fire.py): psi(n) =
ln(|c n| + 1), the threshold L = |L_multiplier init_L|, x = psi(i - j) / (psi(max(i, L)) + eps),
ReLU as (p + |p|) / 2 on the exact pre-activation, and the head's output as an exact dot product
(mpmath.fdot) plus b2, at the caller's precision (200 bits)."""

from __future__ import annotations

import mpmath
import numpy as np


def bias_exact(q_positions, k_positions, c, L_multiplier, W1, b1, W2, b2, init_L, eps):
    f = lambda v: mpmath.mpf(float(v))  # noqa: E731
    c, thr, eps = f(np.ravel(c)[0]), abs(f(np.ravel(L_multiplier)[0]) * f(init_L)), f(eps)
    W1 = [f(v) for v in np.ravel(W1)]
    b1 = [f(v) for v in np.ravel(b1)]
    W2 = [[f(v) for v in row] for row in np.asarray(W2)]
    b2 = [f(v) for v in np.ravel(b2)]

    def psi(n):
        return mpmath.ln(mpmath.fabs(c * n) + 1)

    qp, kp = [int(v) for v in q_positions], [int(v) for v in k_positions]
    out = np.empty((len(W2), len(qp), len(kp)), dtype=object)
    for a, i in enumerate(qp):
        denominator = psi(i if i > thr else thr) + eps
        for b, j in enumerate(kp):
            x = psi(mpmath.mpf(i - j)) / denominator
            hidden = [(p + mpmath.fabs(p)) / 2 for p in (w * x + s for w, s in zip(W1, b1))]
            for h, row in enumerate(W2):
                out[h, a, b] = mpmath.fdot(row, hidden) + b2[h]
    return out
