"""Why a rope.apply_qk_fp8 output fails (conformance/rope/apply_qk_fp8.py): the two float8 faults,
then RoPE's own diagnosis on the dequantised values. numpy only.

- ``fp8-not-saturated``: NaN exactly at (some of) the elements whose rope(x) / scale exceeds 448,
  and every other element accepted: the cast did not saturate.
- ``fp8-scale-inverted``: every element accepted around rope(x) * scale (the budget of
  conformance/rope/fp8_grading.py with the scale inverted).
- otherwise conformance.rope.diagnosis on out * scale (the dequantised rotation), with the noise
  floor of e4m3: the diagnosis's floor is a dtype's rounding, and bfloat16's (the coarsest it
  knows, 2**-8) is the nearest to e4m3's 2**-4; the rope faults it names (layout, base, positions)
  move values by about their own size, far above either.
"""

from __future__ import annotations

import numpy as np

from conformance.core.protocol import Graded
from conformance.results import Diagnosis
from conformance.rope import diagnosis, fp8_grading
from reference.rope import fp8

FLOOR_DTYPE = "bfloat16"


def _accepted(x, positions, out, spec, dtype, scale, rotated=None) -> bool:
    trial = Graded(output_f64=out)
    fp8_grading.grade(trial, spec, dtype, x, positions, scale, "trial", rotated)
    ratio = trial.ratio.get("standard")
    return not trial.problems and ratio is not None and ratio <= 1.0


def diagnose(x, positions, out, spec, dtype, scale: float) -> list:
    """Diagnoses of one quantised output ``out`` (float64 [b, s, h, d]) of x at positions."""
    from conformance.core import rotation_reference as reference

    rotated = reference.apply(x, positions, spec, spec.layout)
    y = rotated / scale
    nan = np.isnan(out)
    if nan.any() and np.all(np.abs(y[nan]) > fp8.E4M3_MAX):
        rest = np.where(nan, np.clip(y, -fp8.E4M3_MAX, fp8.E4M3_MAX), out)
        if _accepted(x, positions, rest, spec, dtype, scale):
            return [Diagnosis("fp8-not-saturated", f"{int(nan.sum())} value(s) past 448 (rope(x) / scale up to "
                              f"{float(np.max(np.abs(y))):.4g}) came back NaN instead of +-448: clamp before the "
                              "cast (torch 2.11's eager cast, ml_dtypes and JAX give NaN from 465 up)")]
    if _accepted(x, positions, out, spec, dtype, 1.0 / scale, rotated):
        return [Diagnosis("fp8-scale-inverted", f"the rotated values were multiplied by the scale {scale:g} "
                          f"instead of divided by it (every value within the budget of rope(x) * {scale:g})")]
    finite = np.where(np.isfinite(out), out * scale, np.nan)
    return diagnosis.explain(diagnosis.diagnose_apply, x, positions, finite, spec, FLOOR_DTYPE)
