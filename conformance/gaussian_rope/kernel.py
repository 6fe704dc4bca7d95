"""The Gaussian kernel as gaussian_rope's protocols grade it, on arrays: K(m) per token, its error
coefficient A(m) (|dK| <= u A(m) for K computed with unit roundoff u) and the query-key
distances n - m of the score form. apply.py, score.py, backward.py and diagnosis.py share them.
"""

from __future__ import annotations

import numpy as np

from reference import gaussian_rope


def amplitude(positions, spec) -> np.ndarray:
    """K(m) [batch, seq] of the case's kernel at positions [batch, seq]."""
    return gaussian_rope.kernel(np.asarray(positions), dict(spec.kernel))


def kernel_error(m, kernel) -> np.ndarray:
    """A(m) with |dK(m)| <= u A(m) for K computed with unit roundoff u: sum_j t_j (3 z_j + 5),
    t_j = a_j exp(-z_j), z_j = m^2 / (2 s_j^2). z_j computed with three roundings errs by 3u z_j
    (absolute), which exp turns into a relative error of 3u z_j, plus the exponential (2u), the
    product by a_j (u), the sum and a margin (2u). The exponent's error is what dominates far from
    the centre: at m = 127 with s1 = 5, z_1 = 322."""
    k = dict(kernel)
    m = np.asarray(m, dtype=np.float64)
    out = np.zeros(m.shape)
    for a, s in ((k["a1"], k["s1"]), (k["a2"], k["s2"])):
        z = m * m / (2.0 * s * s)
        out += a * np.exp(-z) * (3.0 * z + 5.0)
    return out


def distances(qp, kp) -> np.ndarray:
    """n - m [b, sq, sk]."""
    return np.asarray(kp, dtype=np.int64)[:, None, :] - np.asarray(qp, dtype=np.int64)[:, :, None]
