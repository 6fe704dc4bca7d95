"""Error budgets of the learned lookup, derived in docs/tolerance.md (section 9, "Learned absolute
position embeddings").

Notation: T is the dtype under test with unit roundoff u_T; x and t = table[row] are the inputs
as the implementation receives them (already in T) and s = x + t their exact sum. A correct
implementation returns s rounded to T once:

    strict    budget = u_T |s| + tiny_T

(round to nearest: |fl_T(s) - s| <= u_T |s|, exactly, not to first order; tiny_T, the smallest
subnormal of T, keeps an exact zero or an underflow from dividing by zero).

``standard`` also admits one float32 intermediate (a float32 table or embedding output added to
x, or x upcast to float32 and cast back), which costs at most

    float64:            u_32 (|x| + |t|)  (x and t rounded to float32)  +  u_32 |s'|  (the sum in
                        float32)  ->  u_32 (|x| + |t| + |s|) (1 + u_32) + 3 tiny_32
    float16, bfloat16:  u_32 |s| (1 + u_T)  (the float32 sum rounded again to T: double rounding)
    float32:            nothing (the intermediate is T itself)

    standard  budget = strict budget + that term

The calibration (tests/learned/test_learned_calibration.py, numbers in docs/tolerance.md) shows
the correct implementations at most at 1.0 of the strict budget (a correctly rounded sum can sit
just under half an ulp) and float32-intermediate ones "acceptable" in float64.
"""

from __future__ import annotations

import numpy as np

from conformance.core.tolerance import SMALLEST_SUBNORMAL, UNIT_ROUNDOFF, check_profile, unit_roundoff

U32 = UNIT_ROUNDOFF["float32"]


def intermediate_term(x, t, s, dtype: str):
    """The extra error of one float32 intermediate (zero for float32 itself), elementwise."""
    u = unit_roundoff(dtype)
    ax, at, as_ = np.abs(x), np.abs(t), np.abs(s)
    if u < U32:  # float64: inputs and the sum rounded to float32
        return U32 * (ax + at + as_) * (1.0 + U32) + 3.0 * SMALLEST_SUBNORMAL["float32"]
    if u > U32:  # float16, bfloat16: the float32 sum rounded again to T
        return U32 * as_ * (1.0 + u)
    return np.zeros(np.shape(as_))


def sum_budget(x, t, dtype: str, profile: str) -> np.ndarray:
    """Budget of each element of x + t in the dtype under test (float64 arrays of x's shape)."""
    x = np.asarray(x, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    s = x + t  # exact for inputs in float32 or narrower; within u_64 |s| for float64 ones
    budget = unit_roundoff(dtype) * np.abs(s) + SMALLEST_SUBNORMAL[dtype]
    if check_profile(profile) == "standard":
        budget = budget + intermediate_term(x, t, s, dtype)
    return budget
