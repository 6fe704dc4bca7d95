"""Why a step of a rope.module script fails: state from an earlier step, the LongRoPE switch, or
buffers rounded by ``module.to(dtype)``; else rope.apply's (rope.cache's) own diagnosis.

A step's output *matches* a candidate when it is within the step's standard budget of the
candidate (the budget of conformance.core.rotation_budgets, as grading uses it): the same test the case
failed against the true reference, so a match is as strong as a pass would have been.

- ``longrope-switch``: the scaling is LongRoPE and the output matches the reference with the
  other factor set (seq_len L instead of past L, or L + 1 instead of at most L).
- ``stale-state``: the output matches the reference state of an earlier step j: either step j's
  frequencies (the reference of this step's positions with step j's current length; only where
  the two lengths give different frequencies) or step j's tables (step j's positions, same
  number of tokens: a cache keyed on the length). The nearest such j is named.
- ``angle-precision``: floating buffers held in bfloat16 or float16 (module.named_buffers())
  after the cast or after a step; the message names them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from conformance.core.protocol import Graded
from conformance.results import Diagnosis
from conformance.core import rotation_budgets as budgets, rotation_reference as reference
from conformance.rope import diagnosis
from conformance.rope.apply import PROTOCOL as APPLY


def _failing(graded: Graded) -> bool:
    ratio = graded.ratio.get("standard")
    return bool(graded.problems) or ratio is None or ratio > 1.0


def _scaling_type(spec) -> str:
    scaling = dict(spec.scaling or {})
    return str(scaling.get("rope_type") or scaling.get("type") or "default")


def _with_len(spec, seq_len):
    return dataclasses.replace(spec, seq_len=int(seq_len))


def matches(step, form: str, positions, spec, dtype) -> bool:
    """Is the step's output within its standard budget of the reference for (positions, spec)?"""
    if form == "x":
        x = step.prepared.inputs_f64["x"]
        candidate = reference.apply(x, positions, spec, spec.layout)
        err = np.abs(np.asarray(step.output, dtype=np.float64) - candidate)
        tmp = Graded()
        with np.errstate(invalid="ignore", over="ignore"):
            APPLY.ratios(tmp, "standard", spec, dtype, x, positions, err)
        ratio = tmp.ratio.get("standard")
        return ratio is not None and ratio <= 1.0
    cos_o, sin_o = np.asarray(step.output, dtype=np.float64)
    tabs = reference.tables(positions, spec)
    err = np.maximum(np.abs(cos_o - tabs.cos), np.abs(sin_o - tabs.sin))
    mag = np.full(err.shape, abs(tabs.attention_factor))
    out_dtype = step.graded.output_dtype or dtype
    budget = budgets.rotation_budget(mag, tabs.phi, spec.rotary_dim, spec.base, out_dtype, "standard")
    with np.errstate(invalid="ignore", divide="ignore"):
        return bool(np.all(err <= budget))


def longrope_switch(spec, step, form, dtype):
    if _scaling_type(spec) != "longrope":
        return None
    big_l = int(spec.scaling["original_max_position_embeddings"])
    long_now = step.seq_len > big_l
    other = big_l if long_now else big_l + 1
    if not matches(step, form, step.positions, _with_len(spec, other), dtype):
        return None
    used, right = ("short", "long") if long_now else ("long", "short")
    return Diagnosis("longrope-switch", f"{step.describe()} used the {used} factors; at length {step.seq_len} "
                     f"LongRoPE uses the {right} ones (long only once the length exceeds "
                     f"original_max_position_embeddings = {big_l})")


def _same_frequencies(spec, a: int, b: int) -> bool:
    fa, af_a = reference.frequencies(_with_len(spec, a))
    fb, af_b = reference.frequencies(_with_len(spec, b))
    return bool(np.array_equal(fa, fb)) and af_a == af_b


def stale_state(spec, step, earlier, form, dtype):
    for old in reversed(earlier):
        if not _same_frequencies(spec, old.seq_len, step.seq_len) and matches(
                step, form, step.positions, _with_len(spec, old.seq_len), dtype):
            return Diagnosis("stale-state", f"{step.describe()} matches the reference state of step {old.index}: "
                             f"the frequencies of length {old.seq_len}, kept from step {old.index} (they must "
                             f"follow the current length {step.seq_len})")
        if old.positions.shape == step.positions.shape and not np.array_equal(old.positions, step.positions) \
                and matches(step, form, old.positions, _with_len(spec, old.seq_len), dtype):
            return Diagnosis("stale-state", f"{step.describe()} matches the reference state of {old.describe()}: "
                             "its cos/sin tables, returned again for another offset (a cache keyed on the "
                             "number of tokens alone?)")
    return None


def rounded_buffers(prepared, dtype):
    if not prepared.low_buffers:
        return None
    parts = []
    for name, (low, seen) in prepared.low_buffers.items():
        when = f"module.to({low})" if seen is None else f"step {seen}"
        parts.append(f"{name!r} ({low}, since {when})")
    return Diagnosis("angle-precision", f"floating buffer(s) rounded to a low-precision dtype: {', '.join(parts)}; "
                     "the frequencies turn far positions by wrong angles (keep inv_freq in float32: a plain "
                     "attribute, or recomputed in forward)")


def fallback(spec, step, form, dtype) -> list:
    """rope.apply's (rope.cache's) diagnosis of the step, messages prefixed with the step."""
    sspec = _with_len(spec, step.seq_len)
    if form == "x":
        found = diagnosis.explain(diagnosis.diagnose_apply, step.prepared.inputs_f64["x"], step.positions,
                                  step.output, sspec, dtype)
    else:
        found = diagnosis.explain(diagnosis.diagnose_cache, step.positions, tuple(step.output), sspec,
                                  step.graded.output_dtype or dtype)
    return [Diagnosis(d.code, f"{step.describe()}: {d.message}") for d in found]


def diagnose(spec, prepared, dtype) -> list:
    """Diagnoses of a failing rope.module case (see the module docstring), one per code."""
    graded = [s for s in prepared.steps if s.graded is not None and s.output is not None]
    failing = [s for s in graded if _failing(s.graded)]
    if not failing:
        return []
    found = []
    rounded = rounded_buffers(prepared, dtype)
    if rounded is not None:
        found.append(rounded)
    for step in failing:
        d = longrope_switch(spec, step, prepared.form, dtype) or stale_state(
            spec, step, [s for s in graded if s.index < step.index], prepared.form, dtype)
        if d is not None and all(f.code != d.code for f in found):
            found.append(d)
    if not found:
        worst = max(failing, key=lambda s: s.graded.ratio.get("standard") or np.inf)
        found = fallback(spec, worst, prepared.form, dtype)
    return found
