"""mpmath oracle for KERPLE, written again from the formula (no code shared with kerple.py): the
clamped parameters p = max(r, 1e-2) (power's exponent also min(., 2)), then -r1 ln(1 + r2 n) or
-r1 exp(r2 ln n) (0 at n = 0) with n = |i - j|, at the caller's precision (200 bits)."""

from __future__ import annotations

import mpmath
import numpy as np

_LOW = mpmath.mpf(0.01)  # the double nearest 1e-2, as the float64 code compares with


def bias_exact(variant, r1, r2, q_positions, k_positions):
    heads = len(r1)
    qp, kp = [int(v) for v in q_positions], [int(v) for v in k_positions]
    out = np.empty((heads, len(qp), len(kp)), dtype=object)
    for h in range(heads):
        a = max(mpmath.mpf(float(r1[h])), _LOW)
        b = max(mpmath.mpf(float(r2[h])), _LOW)
        if variant == "power":
            b = min(b, mpmath.mpf(2))
        for i, p in enumerate(qp):
            for j, r in enumerate(kp):
                n = mpmath.mpf(abs(p - r))
                if variant == "log":
                    out[h, i, j] = -a * mpmath.ln(1 + b * n)
                else:
                    out[h, i, j] = -a * mpmath.exp(b * mpmath.ln(n)) if n else mpmath.mpf(0)
    return out
