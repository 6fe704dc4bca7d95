"""mpmath oracle for M-RoPE: pair i turned by p_s(i) theta_i in mpmath, from scratch (the stream of
each pair written out again from the two models' rules)."""

from __future__ import annotations

import mpmath
import numpy as np


def stream_of(i, half, section, variant):
    if variant == "qwen2":
        return 0 if i < section[0] else (1 if i < section[0] + section[1] else 2)
    if i % 3 == 1 and i < 3 * section[1]:
        return 1
    if i % 3 == 2 and i < 3 * section[2]:
        return 2
    return 0


def apply_exact(x, positions, rotary_dim, base, layout, section, variant, prec=200):
    x = np.asarray(x, dtype=np.float64)
    pos = np.asarray(positions, dtype=np.int64)
    r, half = int(rotary_dim), int(rotary_dim) // 2
    out = np.empty(x.shape, dtype=object)
    with mpmath.workprec(prec):
        b_ = mpmath.mpf(float(base))
        thetas = [b_ ** (-mpmath.mpf(2 * i) / r) for i in range(half)]
        for bi, si, h in np.ndindex(x.shape[0], x.shape[1], x.shape[2]):
            row = [mpmath.mpf(float(v)) for v in x[bi, si, h]]
            res = list(row)
            for i in range(half):
                ang = int(pos[stream_of(i, half, section, variant), bi, si]) * thetas[i]
                c, s = mpmath.cos(ang), mpmath.sin(ang)
                j0, j1 = (i, i + half) if layout == "half" else (2 * i, 2 * i + 1)
                res[j0] = row[j0] * c - row[j1] * s
                res[j1] = row[j0] * s + row[j1] * c
            out[bi, si, h, :] = res
    return out
