"""The float8 budget of rope.apply_qk_fp8 (derived in conformance/rope/apply_qk_fp8.py and
docs/tolerance.md): the RoPE budget of the input dtype, carried through the division by the scale,
then widened to the e4m3 values that bracket it. numpy only.

Shapes: x, the output and the budgets [b, s, h, d] float64; positions [b, s].
"""

from __future__ import annotations

import numpy as np

from conformance.core import rotation_budgets as budgets
from conformance.core import rotation_reference as reference
from conformance.core import tolerance
from conformance.core.grading import grade_profiles
from conformance.core.tensors import argmax_index, over_budget, per_position_curve, ratio_max, token_max
from reference.rope import fp8

# y = rope(x) / scale: the quotient rounded once, or the reciprocal of the scale and a product (2).
DIVISION_ROUNDINGS = 2.0


def element_budget(x, positions, spec, dtype: str, profile: str) -> np.ndarray:
    """The rotation budget of every element of rope(x) in the input dtype: each pair's budget
    (conformance.core.rotation_budgets, attention factor included) for both of its elements, the
    passthrough budget past rotary_dim. float64 [b, s, h, d]."""
    r = spec.rotary_dim
    first, second = reference.pair_indices(r, spec.layout)
    tabs = reference.tables(positions, spec)
    mag = np.abs(x[..., first]) + np.abs(x[..., second])
    pair = budgets.scaled_rotation_budget(mag, tabs.phi[:, :, None, :], r, spec.base, dtype, profile,
                                          tabs.attention_factor)
    out = np.empty(x.shape, dtype=np.float64)
    out[..., first], out[..., second] = pair, pair
    out[..., r:] = tolerance.passthrough_budget(x[..., r:], dtype, profile)
    return out


def accepted(rotated, budget, scale: float, dtype: str, profile: str) -> tuple:
    """(target, low, high): y = rotated / scale clamped to +-448, and the accepted e4m3 interval
    [round_down(y - w), round_up(y + w)] (saturated), w = b / scale + DIVISION_ROUNDINGS * u_tab *
    (|y| + b / scale)."""
    y = rotated / scale
    b = budget / scale
    w = b + DIVISION_ROUNDINGS * tolerance.table_roundoff(dtype, profile) * (np.abs(y) + b)
    return np.clip(y, -fp8.E4M3_MAX, fp8.E4M3_MAX), fp8.round_down(y - w), fp8.round_up(y + w)


def ratios(out, target, low, high) -> np.ndarray:
    """|out - target| over the distance from target to the accepted end on out's side: <= 1 exactly
    when low <= out <= high; 0/0 is 0, anything over a zero distance and NaN are inf."""
    above = out >= target
    reach = np.where(above, high - target, target - low)
    return tolerance.ratio(np.abs(out - target), reach)


def grade(graded, spec, dtype: str, x, positions, scale: float, what: str, rotated=None) -> None:
    """Fill graded (its output_f64 the float8 values as float64) against rope(x) / scale in both
    profiles. ``rotated`` replaces the float64 rotation of x (the diagnosis grades mutants)."""
    if rotated is None:
        rotated = reference.apply(x, positions, spec, spec.layout)
    out = graded.output_f64

    def fill(profile, _err):
        target, low, high = accepted(rotated, element_budget(x, positions, spec, dtype, profile), scale, dtype,
                                     profile)
        r = ratios(out, target, low, high)
        finite = r[np.isfinite(r)]
        graded.ratio[profile] = float(finite.max()) if finite.size else None
        graded.worst_index[profile] = argmax_index(r)
        graded.mismatch[profile] = over_budget(r) + ("values",)
        reach = np.maximum(high - target, target - low)
        graded.curve[profile] = per_position_curve(positions, token_max(np.abs(out - target)), token_max(reach),
                                                   ratio_max(r))

    grade_profiles(graded, out, np.clip(rotated / scale, -fp8.E4M3_MAX, fp8.E4M3_MAX), what, fill)
