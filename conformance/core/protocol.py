"""What every protocol provides to the family-free runner, and the records it exchanges.

A protocol module (``conformance/<family>/<protocol>.py``) exposes ``PROTOCOL``, an instance of a
:class:`Protocol` subclass. The runner (conformance.runner) drives it through these hooks only:

    spec(case)                                  the adapter's ``spec`` argument for a golden case
    prepare(case, spec, dtype, device)          the adapter's arguments (:class:`Prepared`)
    grade(case, spec, prepared, value)          validation problems, errors and budget ratios in
                                                both profiles (:class:`Graded`)
    diagnose(case, spec, prepared, graded, dtype)   why a failing output fails (Diagnosis list)
    expected_error(case, spec)                  None, or the Diagnosis for returning a value where
                                                the right answer is to raise
    probe(invoker, cases, options)              what the implementation does, found before
                                                grading, to report and explain (:class:`Probe`, or
                                                None); a probe never skips or re-grades a case
    excluded(spec, options)                     None, or why the user's explicit option (--layout,
                                                --isolate) leaves such a case out
    blackbox(invoker, dtype, device, probe)     identity checks on the implementation itself
    locate(case, spec, prepared, index)         an output element's place in words (batch row,
                                                position, head, pair...)
    repro_call()                                the adapter call in a Python repro

Training hooks (``--grad``, conformance.training; a protocol whose ``differentiable`` is False
keeps the defaults and ``--grad`` is a usage error for it):

    grad_inputs(case, spec, prepared)           {role: index of the adapter argument} whose
                                                gradients are graded ({}: none for this case);
                                                for a protocol that drives_calls, the index is
                                                into the arguments of the calls it makes
    cotangents(case, spec, prepared)            one cotangent tensor per output tensor
    grade_backward(case, spec, prepared, cotangents, grads)   {role: Graded} of each gradient
    diagnose_backward(case, spec, prepared, cotangents, grads, graded, dtype)   why it fails
    grad_blackbox(invoker, device, probe)       black-box gradient checks (gradcheck)

A family's own vocabulary (layouts, variants, tables) stays inside its folder; the runner never
looks inside a case. torch is imported inside functions only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np


@dataclass
class Prepared:
    """The adapter's arguments for one case in one dtype, and what grading needs besides.

    args        the positional arguments of the adapter call
    inputs_f64  the inputs as the adapter sees them (rounded to the dtype), in float64 numpy
    watched     name -> (tensor passed to the adapter, pristine clone) for the mutation check

    For a protocol that ``drives_calls`` the runner also sets, before ``grade``:
    invoker     the run's invoker: ``invoker.call_with(f, *args)`` calls a callable the adapter
                returned under the run's timeout, time limit and process-state guard
    plan        the case's training plan (conformance.training.make_plan) under --grad or
                --autocast, None otherwise: the protocol passes it on to its calls
    """

    args: tuple
    inputs_f64: dict
    watched: dict = field(default_factory=dict)
    dtype: Optional[str] = None
    device: str = "cpu"
    invoker: Any = None
    plan: Optional[dict] = None


@dataclass
class Graded:
    """The grading of one returned value (budget ratios in both profiles)."""

    problems: list = field(default_factory=list)  # list[Diagnosis] from validation
    output_f64: Optional[np.ndarray] = None  # None when the value could not be read
    output_dtype: Optional[str] = None
    max_abs_error: Optional[float] = None
    ratio: dict = field(default_factory=dict)  # profile -> budget ratio (finite elements)
    worst_index: dict = field(default_factory=dict)  # profile -> index list
    mismatch: dict = field(default_factory=dict)  # profile -> (over budget, total, unit: "pairs")
    curve: dict = field(default_factory=dict)  # profile -> [[position, max_error, max_budget]]
    notes: dict = field(default_factory=dict)  # profile -> list[str]
    # A protocol that drives its calls (Protocol.drives_calls) under a training plan: what its
    # calls gave, in TrainingCall's form {"grads", "cotangent_dtypes", "problem"}, or {"note"}
    # when there was nothing to differentiate. None otherwise.
    training: Optional[dict] = None

    @property
    def gradable(self) -> bool:
        return self.output_f64 is not None


class Probe:
    """What a protocol's probe found before grading (RoPE: the pair layout).

    A probe detects and explains; it decides nothing about a case (docs/design.md, "Skips"): a
    case is skipped only when the adapter raises Unsupported for that very case or when the user's
    explicit option excludes it (``Protocol.excluded``), and every case is graded under its own
    spec. ``to_json()`` is the report's ``probe`` object; ``describe()`` one line for people;
    ``explain(spec)`` a note added to failing cases of such a spec (what the probe saw, never a
    verdict); ``blackbox_options`` are passed to the protocol's black-box checks.
    """

    blackbox_options: dict = {}

    def to_json(self) -> dict:
        return {}

    def describe(self) -> str:
        return ""

    def explain(self, spec) -> Optional[str]:
        return None


class Protocol:
    """Interface of a protocol (see the module docstring)."""

    name = ""
    family = ""
    signature = ""
    layouts: tuple = ()  # values --layout accepts besides "auto" (spec.layout values the user may pick)
    dtype_free = False  # the adapter gets no tensor in the dtype under test: graded once per case
    # The adapter returns a callable that grade() calls itself (rope.module's factory): the runner
    # calls the adapter plainly and hands grade() its invoker and the training plan (Prepared).
    drives_calls = False
    # Why a result within standard but over strict is only "acceptable" (CaseResult.notes).
    acceptable_note = "float32 intermediate arithmetic"
    # What a Graded.curve point's first number is: "position" (the token position m), or "distance"
    # (the query-key distance, for relative biases): the plot's axis, and whether a case has a
    # first failing position.
    curve_axis = "position"

    def spec(self, case):
        raise NotImplementedError

    def prepare(self, case, spec, dtype: Optional[str], device: str) -> Prepared:
        raise NotImplementedError

    def grade(self, case, spec, prepared: Prepared, value: Any) -> Graded:
        raise NotImplementedError

    def diagnose(self, case, spec, prepared: Prepared, graded: Graded, dtype: str) -> list:
        return []

    def expected_error(self, case, spec):
        """None when the case has an output to grade; for a case whose right answer is an
        exception, the Diagnosis a returned value gets (the case then passes when it raises)."""
        return None

    def probe(self, invoker, cases, options) -> Optional[Probe]:
        return None

    def excluded(self, spec, options) -> Optional[str]:
        """Why the user's explicit option leaves a case of this spec out (None: graded). The only
        exclusion every protocol shares is ``--layout``: a declared layout leaves out the cases
        whose ``spec.layout`` is another of ``layouts``."""
        declared = getattr(options, "layout", "auto")
        layout = getattr(spec, "layout", None)
        if declared != "auto" and layout in self.layouts and layout != declared:
            return f"--layout {declared} was declared: {layout}-layout cases are not graded"
        return None

    def blackbox(self, invoker, dtype, device: str, probe: Optional[Probe]) -> list:
        return []

    @property
    def arity(self) -> int:
        """The number of positional arguments the adapter gets, from ``signature``."""
        inside = self.signature.split("(", 1)[1].split(")", 1)[0]
        return len([a for a in inside.split(",") if a.strip()])

    def locate(self, case, spec, prepared: Prepared, index) -> str:
        """Where an element of the output is, in the words of the family (RoPE: "batch row 0,
        position 4095 (token 0), head 1, dim 17 (pair 17)"); index as Graded.worst_index."""
        return f"element {list(index)}"

    # -- training (--grad) -----------------------------------------------------------------

    differentiable = False  # True: the training hooks below are implemented

    def grad_inputs(self, case, spec, prepared: Prepared) -> dict:
        """{role: index into prepared.args} of the float inputs whose gradient is graded; {} when
        this case has none (e.g. an in-place kernel): its forward is still graded."""
        return {}

    def cotangents(self, case, spec, prepared: Prepared) -> tuple:
        """One cotangent tensor per output tensor, shaped and laid out like it, in the dtype under
        test, drawn from the case (conformance.training.cotangent)."""
        raise NotImplementedError

    def grade_backward(self, case, spec, prepared: Prepared, cotangents, grads) -> dict:
        """{role: Graded} of each input's gradient against the float64 reference backward.

        cotangents: the tensors the backward received (cast to their output's dtype); grads:
        {role: tensor or None}; prepared.dtype is the dtype whose budget applies."""
        raise NotImplementedError

    def diagnose_backward(self, case, spec, prepared: Prepared, cotangents, grads, graded: dict,
                          dtype: str) -> list:
        return []

    def grad_blackbox(self, invoker, device: str, probe: Optional[Probe]) -> list:
        return []

    def repro_call(self) -> str:
        """The adapter call in a Python repro, using the names ``args`` built by ``prepare``."""
        return "fn(*args)"
