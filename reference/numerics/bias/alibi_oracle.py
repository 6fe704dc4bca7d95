"""mpmath oracle for ALiBi, written from the closed form: slope k of a power-of-two count c is
2^(-8k/c); a non-power count n takes c = 2^floor(log2 n) slopes of c, then the odd-indexed
slopes 2^(-8(2k-1)/(2c)) = 2^(-4(2k-1)/c), k = 1..n-c."""

from __future__ import annotations

import mpmath
import numpy as np


def slopes_exact(n: int) -> list:
    c = 1 << (int(n).bit_length() - 1)
    out = [mpmath.power(2, -mpmath.mpf(8 * k) / c) for k in range(1, c + 1)]
    out += [mpmath.power(2, -mpmath.mpf(4 * (2 * k - 1)) / c) for k in range(1, n - c + 1)]
    return out


def bias_exact(n, q_positions, k_positions, causal):
    s = slopes_exact(n)
    qp, kp = np.asarray(q_positions, dtype=np.int64), np.asarray(k_positions, dtype=np.int64)
    out = np.empty((n, qp.size, kp.size), dtype=object)
    for h in range(n):
        for i, p in enumerate(qp.tolist()):
            for j, r in enumerate(kp.tolist()):
                d = p - r if causal else abs(p - r)
                out[h, i, j] = -s[h] * d
    return out
