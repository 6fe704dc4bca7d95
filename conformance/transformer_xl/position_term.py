"""The position term of Transformer-XL's score as its budgets need it (score.py's docstring derives
them): the sinusoid table R at the case's distances, its own budget (conformance.core
.sinusoid_budgets) and r = R W^T with its error. The forward's budget (score.py) and the
gradients' (backward.py) both use it.
"""

from __future__ import annotations

import numpy as np

from conformance.core import sinusoid_budgets, tolerance
from reference import transformer_xl


def position_terms(qlen: int, w, spec, dtype: str, profile: str, dist=None) -> dict:
    """The position term's pieces at the case's distances (module docstring): ``values`` (the
    distinct distances) and ``index`` [qlen, klen] into them, |R| and its budget e_R [n, d_model],
    |r| = |R W^T| and its error dr [n, n_head d_head]. ``dist``: the (clamped) distances of a graded
    subgrid [rows, keys] instead of every query's and key's (score.View)."""
    u = tolerance.table_roundoff(dtype, profile)
    a = tolerance.accumulation_roundoff(dtype, profile)
    if dist is None:
        dist = transformer_xl.distances(qlen, spec.mlen, spec.clamp_len)
    values, index = np.unique(dist, return_inverse=True)
    R = np.abs(transformer_xl.sinusoid(values, spec.d_model, backend="numpy"))  # [n, d_model]
    table = sinusoid_budgets.Sinusoid(spec.d_model, "concatenated", "2i/d", transformer_xl.BASE, 1)
    e_R = sinusoid_budgets.table_budget(values, table, dtype, profile)
    aw = np.abs(w)
    return {"values": values, "index": index.reshape(dist.shape), "R": R, "e_R": e_R, "r": np.abs(R @ w.T),
            "dr": (e_R + (spec.d_model * a + u) * R) @ aw.T}
