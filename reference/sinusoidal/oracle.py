"""mpmath oracle of the sinusoidal tables: exact values that certify the golden vectors.

Independent of the float64 path: frequencies, column placement and sin / cos are recomputed here
from the formulas with Python integers and mpmath (``PREC_BITS`` plus the bits of the position, so
the angle keeps >= PREC_BITS - 64 correct bits for |p| <= 2**53).
"""

from __future__ import annotations

import mpmath
import numpy as np

PREC_BITS = 256


def _exponent(i: int, d: int, layout: str, rule: str):
    """2i/d (i/floor(d/2) in a concatenated table: its odd-d form), or i/(floor(d/2) - 1)."""
    if rule != "2i/d":
        return mpmath.mpf(i) / (d // 2 - 1)
    return mpmath.mpf(i) / (d // 2) if layout == "concatenated" else mpmath.mpf(2 * i) / d


def row_exact(p: int, d: int, layout: str, rule: str, base: float) -> list:
    """One 1-D row [d] of mpf."""
    with mpmath.workprec(PREC_BITS + max(int(p).bit_length(), 1)):
        b = mpmath.mpf(base)
        out = []
        for col in range(d):
            if layout == "interleaved":
                i, use_sin = col // 2, col % 2 == 0
            else:
                h = d // 2
                if col >= 2 * h:
                    out.append(mpmath.mpf(0))
                    continue
                i, use_sin = (col, True) if col < h else (col - h, False)
            angle = p * b ** (-_exponent(i, d, layout, rule))
            out.append(+(mpmath.sin(angle) if use_sin else mpmath.cos(angle)))
        return out


def table_exact(positions, d_model: int, layout: str, exponent: str, base: float, dims: int = 1):
    """Object array of mpf [..., d_model] (positions [...] or [..., 2] for dims=2)."""
    pos = np.asarray(positions, dtype=np.int64)
    lead = pos.shape if dims == 1 else pos.shape[:-1]
    out = np.empty(lead + (d_model,), dtype=object)
    for idx in np.ndindex(lead):
        if dims == 1:
            row = row_exact(int(pos[idx]), d_model, layout, exponent, base)
        else:
            half = d_model // 2
            row = (row_exact(int(pos[idx][0]), half, layout, exponent, base)
                   + row_exact(int(pos[idx][1]), half, layout, exponent, base))
        for j, v in enumerate(row):
            out[idx + (j,)] = v
    return out
