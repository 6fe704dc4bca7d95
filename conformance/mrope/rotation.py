"""M-RoPE's rotation as mrope.apply grades it, on arrays: the float64 reference (reference.mrope)
and the per-profile grading of a rotated output against RoPE's rotation budget at each pair's
stream position (score); the protocol (apply.py), its backward (backward.py, the cotangent
as x) and its diagnosis use them.
"""

from __future__ import annotations

import numpy as np

from conformance.core import tolerance
from conformance.core.protocol import Graded
from conformance.core import rotation_budgets as budgets
from conformance.core.tensors import argmax_index, finite_max, over_budget, per_position_curve, ratio_max, token_max
from reference import mrope
from reference.numerics.frequencies import inv_freq
from reference.numerics.layouts import pair_indices


def reference(x, positions, spec, **changes):
    kw = dict(mrope_section=spec.mrope_section, variant=spec.variant, rotary_dim=spec.rotary_dim, base=spec.base,
              layout=spec.layout, backend="numpy")
    kw.update(changes)
    return mrope.apply(x, positions, **kw)


def score(graded: Graded, profile: str, spec, dtype: str, x, pos, err) -> None:
    """Fill graded's ratio, worst index, mismatch and curve for one profile: err [b, s, h, d] against
    the rotation budget of the pairs of x at |p_s(i) theta_i| and the passthrough budget of x's tail.
    (The backward grades its gradient with the cotangent as x: conformance.mrope.backward.)"""
    r = spec.rotary_dim
    first, second = pair_indices(r, spec.layout)
    which = mrope.streams(r, spec.mrope_section, spec.variant)
    theta = inv_freq(r, spec.base)
    phi = np.abs(pos[which, :, :].transpose(1, 2, 0).astype(np.float64)) * theta  # [b, s, r/2]
    mag = np.abs(x[..., first]) + np.abs(x[..., second])
    pair_err = np.maximum(err[..., first], err[..., second])
    budget = budgets.rotation_budget(mag, phi[:, :, None, :], r, spec.base, dtype, profile)
    pr = tolerance.ratio(pair_err, budget)
    tr = tolerance.ratio(err[..., r:], tolerance.passthrough_budget(x[..., r:], dtype, profile))
    both = np.concatenate([pr, tr], axis=-1)
    graded.ratio[profile] = finite_max(both)
    idx = argmax_index(both)
    idx[-1] = int(first[idx[-1]]) if idx[-1] < r // 2 else r + idx[-1] - r // 2
    graded.worst_index[profile] = idx
    graded.mismatch[profile] = over_budget(pr, tr) + ("pairs and pass-through values" if tr.size else "pairs",)
    graded.curve[profile] = per_position_curve(pos[0], token_max(err), token_max(budget), ratio_max(both))
