"""xPos as xpos.apply grades it, on arrays: the float64 reference (reference.xpos), the pair norms,
the fit of the common centring c and the element budget (apply.py's docstring derives it). The
protocol (apply.py), its backward (backward.py) and its diagnosis (diagnosis.py) use them.
"""

from __future__ import annotations

import numpy as np

from conformance.core import rotation_budgets as budgets, tolerance
from reference import xpos
from reference.numerics.frequencies import inv_freq
from reference.numerics.layouts import pair_indices


def reference(q, k, positions, spec, centre=0.0):
    return xpos.apply(q, k, positions, rotary_dim=spec.rotary_dim, base=spec.base, layout=spec.layout,
                      scale_base=spec.scale_base, gamma=spec.gamma, centre=centre, backend="numpy")


def pair_norms(x, spec):
    first, second = pair_indices(spec.rotary_dim, spec.layout)
    return np.hypot(x[..., first], x[..., second])


def fit_centre(q, k, qo, ko, positions, spec):
    """The common centring c that best explains the outputs' scales, or None."""
    q0, k0 = reference(q, k, positions, spec)
    with np.errstate(divide="ignore", invalid="ignore"):
        lq = np.log(pair_norms(qo, spec) / pair_norms(q0, spec))
        lk = np.log(pair_norms(ko, spec) / pair_norms(k0, spec))
    half = 0.5 * (lq - lk)  # [b, s, h, r/2]: -(c / B) ln zeta_i
    lnz = np.log(xpos.zeta(spec.rotary_dim, spec.gamma))
    estimates = []
    for i in np.flatnonzero(np.abs(lnz) >= 0.05):
        v = half[..., i]
        v = v[np.isfinite(v)]
        if v.size:
            estimates.append(-spec.scale_base * float(np.median(v)) / lnz[i])
    if not estimates:
        return None
    c = float(np.median(estimates))
    snapped = round(2 * c) / 2
    return snapped if abs(snapped - c) <= 1e-3 * max(1.0, abs(c)) else c


def budget(x, positions, spec, centre, sign, dtype, profile) -> np.ndarray:
    """Element budget of q (sign 1) or k (sign -1) [b, s, h, d] scaled by zeta^((m - c) / B): RoPE's
    rotation budget times the pair's scale, the scale's own error and a subnormal floor (module
    docstring of apply.py); the tail past rotary_dim passes through."""
    r = spec.rotary_dim
    first, second = pair_indices(r, spec.layout)
    mag = np.abs(x[..., first]) + np.abs(x[..., second])
    theta = inv_freq(r, spec.base)
    phi = np.abs(np.asarray(positions, dtype=np.float64))[:, :, None, None] * theta
    lnz = np.log(xpos.zeta(r, spec.gamma))
    e = sign * (np.asarray(positions, dtype=np.float64) - centre)[:, :, None, None] / spec.scale_base
    scale = np.exp(e * lnz)
    u = tolerance.table_roundoff(dtype, profile)
    pair = (scale * budgets.rotation_budget(mag, phi, r, spec.base, dtype, profile)
            + u * scale * (3.0 * np.abs(e * lnz) + 4.0) * mag
            + tolerance.SMALLEST_SUBNORMAL[dtype] * (1.0 + mag))
    out = np.empty(x.shape)
    out[..., first] = pair
    out[..., second] = pair
    out[..., r:] = tolerance.passthrough_budget(x[..., r:], dtype, profile)
    return out
