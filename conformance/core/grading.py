"""The grading loop every protocol runs on an output (or a gradient) against its float64 reference.

``grade_profiles`` reports NaN/Inf where the reference is finite (a validation problem), takes the
element errors |out - ref| and the largest finite one, then lets the family fill each tolerance
profile (conformance.core.tolerance.PROFILES: standard, strict) from those errors with its own
budget (ratio = error / budget per element; the largest finite ratio, its index, the count over
budget, the per-position curve).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from conformance.core import tolerance
from conformance.core.tensors import abs_error, finite_max, nonfinite_problem


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
