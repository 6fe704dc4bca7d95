"""Shared machinery of the protocols that drive a stateful object through a script of steps
(rope.module: a rotary module; attention.decode: an attention layer with its own KV cache).

The adapter is a factory; the protocol ``drives_calls`` (docs/design.md, "Training"): the runner
hands ``Prepared.invoker`` to grade(), and every step goes through ``invoker.call_with`` so that the
per-call timeout, the run's time limit and the process-state guard cover each step. A step that
raises or hangs ends the script with a diagnosis naming the step; each step's grading is folded
into the case's, its worst element prefixed with the step's index.

A step here is any object with ``index`` (int) and ``describe()`` (its words, e.g. "step 1 (1
token(s) at position 6, length 7)").
"""

from __future__ import annotations

from conformance.core import tolerance
from conformance.core.protocol import Graded
from conformance.results import Diagnosis


def call_step(prepared, fn, args):
    """The outcome of ``fn(*args)`` through the run's invoker (or caught in place without one)."""
    if prepared.invoker is not None:
        return prepared.invoker.call_with(fn, *args)
    from conformance.isolation import _call_catching

    return _call_catching(fn, args)


def step_failure(step, outcome) -> Diagnosis:
    """The diagnosis that ends a script at a step that did not return: ``raised`` (Unsupported
    included: a step refusing mid-script is not a skip of the case) or ``timeout``/``crashed``."""
    code = "raised" if outcome.kind in ("raised", "unsupported") else outcome.kind
    return Diagnosis(code, f"{step.describe()}: {outcome.error}")


def merge_step(graded: Graded, step, g: Graded) -> None:
    """Fold a step's grading g (of its output or of its gradient) into the case's: problems
    named by step, the largest ratio, its worst element prefixed with the step."""
    for p in g.problems:
        graded.problems.append(Diagnosis(p.code, f"{step.describe()}: {p.message}"))
    if g.output_f64 is None:
        return
    if graded.output_f64 is None:
        graded.output_f64, graded.output_dtype = g.output_f64, g.output_dtype
    if g.max_abs_error is not None:
        graded.max_abs_error = max(graded.max_abs_error or 0.0, g.max_abs_error)
    for profile in tolerance.PROFILES:
        ratio = g.ratio.get(profile)
        best = graded.ratio.get(profile)
        if profile not in graded.ratio or (ratio is not None and (best is None or ratio > best)) \
                or (ratio is None and best is not None):
            graded.ratio[profile] = ratio
            if g.worst_index.get(profile) is not None:
                graded.worst_index[profile] = [step.index] + list(g.worst_index[profile])
            graded.curve[profile] = g.curve.get(profile, [])
            if profile == "standard":
                graded.output_f64, graded.output_dtype = g.output_f64, g.output_dtype
        over, total, unit = g.mismatch.get(profile, (0, 0, "pairs"))
        o0, t0, _ = graded.mismatch.get(profile, (0, 0, unit))
        graded.mismatch[profile] = (o0 + over, t0 + total, unit)
        for note in g.notes.get(profile, []):
            text = f"{step.describe()}: {note}"
            graded.notes.setdefault(profile, [])
            if text not in graded.notes[profile]:
                graded.notes[profile].append(text)
