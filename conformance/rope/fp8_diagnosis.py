"""Why a rope.apply_qk_fp8 output fails (conformance/rope/apply_qk_fp8.py): the two float8 faults,
then RoPE's own diagnosis on the dequantised values. numpy only.

- ``fp8-not-saturated``: NaN exactly at (some of) the elements whose rope(x) / scale exceeds 448,
  and every other element accepted: the cast did not saturate.
- ``fp8-scale-inverted``: every element accepted around rope(x) * scale (the budget of
  conformance/rope/fp8_grading.py with the scale inverted).
- otherwise RoPE's mutants (conformance.rope.diagnosis.apply_mutants, the closest one by
  conformance.core.mutants.closest_mutant) on out * scale, the dequantised rotation, with saturated
  values (which say only |y| >= 448) left out, and a noise floor that adds e4m3's rounding to the
  dtype's: sqrt(mean(spacing(y)^2) / 12) * scale, the rms of a rounding to a grid of that spacing
  (the input dtype's floor alone, 2**-8 at most, is 16 times too small: a base off by 2 at small
  positions went unnamed); the closest mutant names the fault only when the quantised values are
  accepted around it (the float8 budget with the mutant as the rotation). When none does,
  rope.apply's own diagnosis (output scale, angle noise) with bfloat16's floor.
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
    # Saturated values say only that |y| >= 448: left out (NaN), as the diagnosis leaves out NaN.
    dequantised = np.where(np.isfinite(out) & (np.abs(out) < fp8.E4M3_MAX), out * scale, np.nan)
    found = diagnosis.explain(_closest, x, positions, dequantised, out, spec, dtype, scale)
    return found or diagnosis.explain(diagnosis.diagnose_apply, x, positions, dequantised, spec, FLOOR_DTYPE)


def _closest(x, positions, dequantised, out, spec, dtype, scale) -> list:
    """The RoPE mutant closest to the dequantised values, with e4m3's rounding in the noise floor,
    kept only when the quantised values are accepted around it (the float8 budget with the mutant
    as the rotation): under e4m3's noise a near mutant of another code (a fitted base against the
    frequency exponent) can be the closest without being the fault."""
    from conformance.core.mutants import closest_mutant

    xs, ps, ys, si = diagnosis._subsample(x, positions, dequantised)
    quantised = diagnosis._subsample(x, positions, out)[2]
    mask = np.isfinite(ys) & np.isfinite(xs)
    if np.count_nonzero(mask) < 2:
        return []
    reference, mutants, _, theta = diagnosis.apply_mutants(xs, ps, np.where(mask, ys, 0.0), spec,
                                                           seq_index=si[None, :], full_positions=positions)
    step = fp8.spacing(reference / scale)[mask] * scale
    floor = float(np.hypot(diagnosis.noise_floor(xs, ps, spec, theta, dtype), np.sqrt(np.mean(step**2) / 12.0)))
    found = closest_mutant(ys, reference, mutants, mask, floor)
    if found is None or not _accepted(xs, ps, quantised, spec, dtype, scale, found[0].build()):
        return []
    return [Diagnosis(found[0].code, found[0].message)]
