"""mpmath oracle for axial 2-D RoPE, from scratch."""

from __future__ import annotations

import mpmath
import numpy as np


def apply_exact(x, coords, base, layout, order, cls_tokens, prec=200):
    x = np.asarray(x, dtype=np.float64)
    c = np.asarray(coords, dtype=np.int64)
    d = x.shape[3]
    half, quarter = d // 2, d // 4
    out = np.empty(x.shape, dtype=object)
    first_axis = 0 if tuple(order) == ("x", "y") else 1
    with mpmath.workprec(prec):
        thetas = [mpmath.mpf(float(base)) ** (-mpmath.mpf(4 * k) / d) for k in range(quarter)]
        for bi, si, h in np.ndindex(x.shape[0], x.shape[1], x.shape[2]):
            row = [mpmath.mpf(float(v)) for v in x[bi, si, h]]
            res = list(row)
            if si >= cls_tokens:
                for i in range(half):
                    axis = first_axis if i < quarter else 1 - first_axis
                    ang = int(c[bi, si, axis]) * thetas[i % quarter]
                    j0, j1 = (i, i + half) if layout == "half" else (2 * i, 2 * i + 1)
                    res[j0] = row[j0] * mpmath.cos(ang) - row[j1] * mpmath.sin(ang)
                    res[j1] = row[j0] * mpmath.sin(ang) + row[j1] * mpmath.cos(ang)
            out[bi, si, h, :] = res
    return out


def mixed_exact(x, coords, freqs, layout, cls_tokens, prec=200):
    """RoPE-Mixed: pair i of head h turned by x f_x[h, i] + y f_y[h, i], from scratch."""
    x = np.asarray(x, dtype=np.float64)
    c = np.asarray(coords, dtype=np.int64)
    f = np.asarray(freqs, dtype=np.float64)
    half = x.shape[3] // 2
    out = np.empty(x.shape, dtype=object)
    with mpmath.workprec(prec):
        for bi, si, h in np.ndindex(x.shape[0], x.shape[1], x.shape[2]):
            row = [mpmath.mpf(float(v)) for v in x[bi, si, h]]
            res = list(row)
            if si >= cls_tokens:
                for i in range(half):
                    ang = int(c[bi, si, 0]) * mpmath.mpf(float(f[0, h, i])) + int(c[bi, si, 1]) * mpmath.mpf(float(f[1, h, i]))
                    j0, j1 = (i, i + half) if layout == "half" else (2 * i, 2 * i + 1)
                    res[j0] = row[j0] * mpmath.cos(ang) - row[j1] * mpmath.sin(ang)
                    res[j1] = row[j0] * mpmath.sin(ang) + row[j1] * mpmath.cos(ang)
            out[bi, si, h, :] = res
    return out
