"""The grading loop every protocol runs on an output (or a gradient) against its float64 reference.

``grade_profiles`` reports NaN/Inf where the reference is finite (a validation problem), takes the
element errors |out - ref| and the largest finite one, then lets the family fill each tolerance
profile (conformance.core.tolerance.PROFILES: standard, strict) from those errors with its own
budget. ``fill_ratios`` is the fill most families use: ratio = error / budget per element, the
largest finite ratio, its index, the count over budget and, given the positions [batch, seq] of
an output whose leading axes are [batch, seq], the per-position curve (the report's plot).
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from conformance.core import tolerance
from conformance.core.tensors import (abs_error, argmax_index, finite_max, nonfinite_problem, over_budget,
                                      per_position_curve, ratio_max, token_max)


def grade_profiles(graded, out: np.ndarray, ref: np.ndarray, what: str,
                   fill: Callable[[str, np.ndarray], None]) -> np.ndarray:
    """Grade ``out`` against ``ref`` (float64, same shape) into ``graded`` (a
    conformance.core.protocol.Graded): the non-finite problem of ``what``, max_abs_error, and
    ``fill(profile, err)`` for each profile. Returns err = |out - ref| (NaN/Inf where out is)."""
    bad = nonfinite_problem(out, ref, what)
    if bad is not None:
        graded.problems.append(bad)
    err = abs_error(out, ref)
    graded.max_abs_error = finite_max(err)
    for profile in tolerance.PROFILES:
        fill(profile, err)
    return err


def fill_ratios(graded, profile: str, err: np.ndarray, budget: np.ndarray, unit: str,
                positions: Optional[np.ndarray] = None) -> np.ndarray:
    """One profile's ratio, worst index, mismatch (counted in ``unit``) and, with ``positions``
    [batch, seq] (err and budget [batch, seq, ...]), the per-position curve. Returns the ratios."""
    r = tolerance.ratio(err, budget)
    graded.ratio[profile] = finite_max(r)
    graded.worst_index[profile] = argmax_index(r)
    graded.mismatch[profile] = over_budget(r) + (unit,)
    if positions is not None:
        graded.curve[profile] = per_position_curve(positions, token_max(err), token_max(budget), ratio_max(r))
    return r
