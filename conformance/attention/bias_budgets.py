"""The error E_b [b, hq, s, K] a position bias adds to attention's logits (stage 3 of budgets.py's
docstring), shared by the running bound (budgets.py) and the half-precision bound (half.py): ALiBi's
derived here; KERPLE's and FIRE's are those families' forward budgets (conformance.core.bias_budgets,
shared with the families), evaluated at each batch row's query and key positions.
"""

from __future__ import annotations

import numpy as np

from conformance.core import tolerance
from conformance.core.bias_budgets import fire_bias, kerple_bias
from reference.numerics.bias.alibi import slopes
from reference.numerics.bias.fire import EPS, INIT_L


def alibi_logit_error(st: dict, spec, positions: np.ndarray, u: float, t: float) -> np.ndarray:
    """E_b [b, hq, s, K]: the ALiBi bias's absolute error in the logits, 4 t (|b| + B) + u (|z| + B),
    B = m_h max(|p_i|, |p_j|) (stage 3 of the module docstring)."""
    m = slopes(spec.num_heads)[None, :, None, None]
    reach = np.maximum(np.abs(positions)[:, None, :, None], np.max(np.abs(st["kpos"]), axis=1)[:, None, None, None])
    B = m * reach
    vis = st["vis"][:, None]
    return 4 * t * (np.abs(st["bias"]) + B) + u * (np.where(vis, np.abs(st["z"]), 0.0) + B)


def bias_logit_error(st: dict, spec, positions: np.ndarray, dtype: str, profile: str) -> np.ndarray | None:
    """E_b [b, hq, s, K] of the bias in the logits (stage 3), None without a bias: ALiBi's
    alibi_logit_error; KERPLE's and FIRE's own forward budgets (conformance.core.bias_budgets's
    kerple_bias and fire_bias: unit t, T's smallest subnormal included) evaluated at each batch
    row's query and key positions, T5 0 (a lookup); each plus u (|b| + |z|), the bias's cast to T
    and the rounding of its sum with the scaled dot product."""
    u = tolerance.unit_roundoff(dtype)
    t = tolerance.table_roundoff(dtype, profile)
    if spec.encoding == "alibi":
        return alibi_logit_error(st, spec, positions, u, t)
    if spec.encoding not in ("kerple", "fire", "t5"):
        return None
    bias, kpos = st["bias"], st["kpos"]
    rows = range(positions.shape[0])
    if spec.encoding == "kerple":
        own = np.stack([kerple_bias(positions[i], kpos[i], spec.kerple_variant, spec.kerple_r1, spec.kerple_r2,
                                    bias[i], dtype, profile) for i in rows])
    elif spec.encoding == "fire":
        w = {n: st["W"][n] for n in ("c", "L_multiplier", "W1", "b1", "W2", "b2")}
        own = np.stack([fire_bias(positions[i], kpos[i], w, INIT_L, EPS, bias[i], dtype, profile) for i in rows])
    else:
        own = np.zeros_like(bias)
    vis = st["vis"][:, None]
    return own + u * (np.abs(bias) + np.where(vis, np.abs(st["z"]), 0.0))
