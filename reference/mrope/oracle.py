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


def rope_index_exact(token_types, grids):
    """Qwen2-VL's position rule written out again, block by block: [3, b, s] of mpf integers."""
    types = np.asarray(token_types)
    grids = [tuple(int(v) for v in g) for g in np.asarray(grids).reshape(-1, 3)]
    out = np.empty((3,) + types.shape, dtype=object)
    pending = iter(grids)
    for b in range(types.shape[0]):
        start, s = 0, 0
        while s < types.shape[1]:
            if types[b, s] == 0:
                for k in range(3):
                    out[k, b, s] = mpmath.mpf(start)
                start += 1
                s += 1
                continue
            t, h, w = next(pending)
            top = start
            for frame in range(t):
                for row in range(h):
                    for col in range(w):
                        out[0, b, s], out[1, b, s], out[2, b, s] = (mpmath.mpf(start + frame), mpmath.mpf(start + row),
                                                                    mpmath.mpf(start + col))
                        top = max(top, start + frame, start + row, start + col)
                        s += 1
            start = top + 1
    return out
