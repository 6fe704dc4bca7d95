"""Protocol ``rope2d.apply``: ``fn(x, coords, spec) -> tensor like x``, coords [batch, seq, 2].

Graded per pair against reference.rope2d applied to the dtype-rounded x, with RoPE's rotation
budget (conformance.core.rotation_budgets, rotary width d/2: the ladder base^(-4k/d)) at |c theta_k|, c the
pair's coordinate; CLS tokens must come back unchanged (pass-through budget). With --grad the
gradient of x is graded against the float64 reference backward R^T g (conformance/rope2d/backward.py).
"""

from __future__ import annotations

from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.rotation_backward import RotationGradHooks
from conformance.core.tensors import adapter_inputs, check_tensor, mutation_problems
from conformance.rope2d import backward as rope2d_backward
from conformance.rope2d import diagnosis
from conformance.rope2d.rotation import reference, score
from conformance.rope2d.spec import spec_of


class Rope2dApply(RotationGradHooks, Protocol):
    backward = rope2d_backward  # --grad: the gradient of x, R^T g
    position_role = "coords"
    gradcheck_what = "x [1, 5, 1, 8] float64, one CLS token and four patches up to (30, 7), interleaved layout"
    name = "rope2d.apply"
    family = "rope2d"
    signature = "fn(x, coords, spec) -> tensor like x"
    acceptable_note = "float32 angle rounding, growing with position"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, ("x",), ("coords",), dtype, device)
        return Prepared((*args, spec), inputs, watched, dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        x, coords = prepared.inputs_f64["x"], prepared.inputs_f64["coords"]
        out, problems, got = check_tensor(value, "the output", x.shape, prepared.dtype, prepared.device)
        problems += mutation_problems(prepared.watched)
        graded = Graded(problems=problems, output_f64=out, output_dtype=got)
        if out is None:
            return graded
        ref = reference(x, coords, spec)
        grade_profiles(graded, out, ref, "the output",
                       lambda profile, err: score(graded, profile, spec, prepared.dtype, x, coords, err))
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        b, s, h, d = index
        cx, cy = (int(v) for v in prepared.inputs_f64["coords"][b, s])
        token = "CLS token" if s < spec.cls_tokens else f"patch (x {cx}, y {cy})"
        return f"batch row {b}, token {s} ({token}), head {h}, dim {d}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        return diagnosis.diagnose(spec, prepared, graded)


PROTOCOL = Rope2dApply()
