"""The family-free part of the tolerance model (docs/tolerance.md): unit roundoffs, profiles,
budget ratios, and what every family's budget builds on.

Notation: T is the dtype under test with unit roundoff u_T (half an ulp at 1); u_32 = 2**-24 and
u_64 = 2**-53. Two profiles:

- ``standard`` admits intermediate arithmetic in float32 (tables and angles computed in float32,
  as every mainstream implementation does, even for a float64 model);
- ``strict`` admits only the dtype's own rounding (float64 or compensated intermediates).

Each family derives its element budgets from these units in ``conformance/<family>/budgets.py``
and documents the derivation in docs/tolerance.md. A case's budget ratio is max(error / budget).
"""

from __future__ import annotations

import numpy as np

from conformance.results import Diagnosis

PROFILES = ("standard", "strict")
DTYPES = ("float64", "float32", "float16", "bfloat16")

UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}
# Smallest positive subnormal of each dtype: the absolute floor of a budget.
SMALLEST_SUBNORMAL = {
    "float64": 2.0**-1074,
    "float32": 2.0**-149,
    "float16": 2.0**-24,
    "bfloat16": 2.0**-133,
}


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    return profile


def unit_roundoff(dtype, default=None) -> float:
    """u_T for a dtype name ("bfloat16") or a torch dtype (torch.bfloat16).

    A dtype the model does not know raises ValueError, or gives ``default`` when one is given
    (diagnosis uses float32's, so that an exotic dtype still gets an explanation).
    """
    name = str(dtype).replace("torch.", "")
    if name in UNIT_ROUNDOFF:
        return UNIT_ROUNDOFF[name]
    if default is not None:
        return default
    raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")


def table_roundoff(dtype: str, profile: str) -> float:
    """u_tab: the position-independent rounding unit (float32 intermediates admitted by standard)."""
    u = unit_roundoff(dtype)
    return max(u, UNIT_ROUNDOFF["float32"]) if check_profile(profile) == "standard" else u


def accumulation_roundoff(dtype: str, profile: str) -> float:
    """The unit of a sum's additions (a dot product, a reduction over tokens): u_tab, but never
    coarser than float32. Every torch matmul, einsum, sum and softmax accumulates float16 and
    bfloat16 in float32 and rounds the result to T once (cuBLAS, oneDNN and the CPU reductions'
    opmath type; SDPA and flash-attention alike), so an n-term sum in T errs by about n u_32 + u_T
    of its terms' magnitudes, not n u_T: a loop that accumulates in T itself is the accuracy fault
    the budget then reports. Only the unit of the n - 1 additions changes: each rounding to T of
    a stored intermediate still costs u_tab."""
    return min(table_roundoff(dtype, profile), UNIT_ROUNDOFF["float32"])


def angle_roundoff(profile: str) -> float:
    """Unit roundoff of the arithmetic the profile admits for angles: float32 or float64."""
    return UNIT_ROUNDOFF["float32"] if check_profile(profile) == "standard" else UNIT_ROUNDOFF["float64"]


def passthrough_budget(magnitude, dtype: str, profile: str):
    """Budget of an element that is copied (a partial-rotary tail, a looked-up row): one
    rounding at most (an upcast round trip)."""
    return table_roundoff(dtype, profile) * np.abs(magnitude) + SMALLEST_SUBNORMAL[dtype]


def ratio(error, budget) -> np.ndarray:
    """error / budget elementwise; 0/0 is 0, x/0 and NaN errors are inf."""
    err = np.asarray(error, dtype=np.float64)
    bud = np.asarray(budget, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = err / bud
    r = np.where(err == 0, 0.0, r)
    return np.where(np.isnan(r), np.inf, r)


def budget_dtype(*names) -> str:
    """The coarsest of the returned dtypes among those the tolerance model knows (float64 when
    none is known): the dtype a dtype-free protocol's result is graded in."""
    known = [n for n in names if n in UNIT_ROUNDOFF]
    if not known:
        return "float64"
    return max(known, key=lambda n: UNIT_ROUNDOFF[n])


def unknown_dtype_problems(**named) -> list:
    """dtype-changed for each returned floating dtype the tolerance model has no budget for
    (float8 and the like): such a result is graded with the float64 budget, and says why."""
    known = ", ".join(UNIT_ROUNDOFF)
    return [
        Diagnosis("dtype-changed", f"{what} has dtype {name}, which has no error budget (known: {known})")
        for what, name in named.items()
        if name is not None and name not in UNIT_ROUNDOFF
    ]
