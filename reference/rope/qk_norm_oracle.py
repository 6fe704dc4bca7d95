"""mpmath oracle of QK-norm then RoPE (rope.qk_norm), written apart from qk_norm.py for
certification: the norm as x w / sqrt(||x||^2 / n + eps) with the squared norm taken as an mpmath
dot product of the group with itself, the rotation as the complex product (y_a + i y_b) e^(i m
theta) f (RoFormer, arXiv 2104.09864, eq. 12) with the frequencies and factor of
reference.numerics.rotation_oracle (itself apart from the float64 reference). Object arrays of
mpf at the caller's precision."""

from __future__ import annotations

import mpmath
import numpy as np

from reference.numerics.rotation_oracle import frequencies_exact


def forward_exact(x, positions, weight, params):
    """object [b, s, h, d]: the exact output for one of q or k (its weight)."""
    x = np.asarray(x, dtype=np.float64)
    b, s, h, d = x.shape
    r = int(params.get("rotary_dim") or d)
    thetas, f = frequencies_exact(r, float(params["base"]), params.get("scaling"), None)
    full = params["norm_scope"] == "full"
    eps = mpmath.mpf(float(params["eps"]))
    w = [mpmath.mpf(float(v)) for v in np.asarray(weight, dtype=np.float64)]
    out = np.empty(x.shape, dtype=object)
    for bi in range(b):
        for si in range(s):
            rows = [[mpmath.mpf(float(v)) for v in x[bi, si, hh]] for hh in range(h)]
            groups = [[v for row in rows for v in row]] if full else rows
            scales = [1 / mpmath.sqrt(mpmath.fdot(g, g) / len(g) + eps) for g in groups]
            m = int(positions[bi, si])
            for hh in range(h):
                scale = scales[0] if full else scales[hh]
                y = [rows[hh][j] * scale * w[hh * d + j if full else j] for j in range(d)]
                for i, t in enumerate(thetas):
                    a, c = (i, i + r // 2) if params.get("layout", "half") == "half" else (2 * i, 2 * i + 1)
                    z = mpmath.mpc(y[a], y[c]) * mpmath.expj(m * t) * f
                    y[a], y[c] = z.real, z.imag
                out[bi, si, hh] = y
    return out
