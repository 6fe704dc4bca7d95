"""mpmath oracle for xPos, certifying the stored values: the exact rotation (reference.rope.oracle)
times zeta_i^(+-(m - c)/B), zeta written out again from the formula."""

from __future__ import annotations

import mpmath
import numpy as np

from reference.numerics import rotation_oracle


def apply_exact(q, k, positions, rotary_dim, base, layout, scale_base, gamma, centre, prec=rotation_oracle.PREC_BITS):
    pos = np.asarray(positions, dtype=np.int64)
    out = []
    for x, sign in ((q, 1), (k, -1)):
        rotated = rotation_oracle.apply_exact(x, pos, rotary_dim, base, layout, prec=prec)
        with mpmath.workprec(prec):
            g, r = mpmath.mpf(float(gamma)), mpmath.mpf(int(rotary_dim))
            for b, s in np.ndindex(pos.shape):
                e = sign * (mpmath.mpf(int(pos[b, s])) - mpmath.mpf(float(centre))) / mpmath.mpf(float(scale_base))
                for i in range(int(rotary_dim) // 2):
                    z = (g * r + 2 * i) / (r * (g + 1))
                    j0, j1 = (i, i + int(rotary_dim) // 2) if layout == "half" else (2 * i, 2 * i + 1)
                    f = mpmath.exp(e * mpmath.log(z))
                    rotated[b, s, :, j0] = [v * f for v in rotated[b, s, :, j0]]
                    rotated[b, s, :, j1] = [v * f for v in rotated[b, s, :, j1]]
        out.append(rotated)
    return out
