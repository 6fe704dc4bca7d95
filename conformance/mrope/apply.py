"""Protocol ``mrope.apply``: ``fn(x, positions, spec) -> tensor like x``, positions [3, batch, seq].

Graded per pair (the larger error of its two elements) against reference.mrope applied to the
dtype-rounded x, with RoPE's rotation budget (conformance.core.rotation_budgets) at |p_s(i) theta_i|, the
pair's own stream position; the tail past rotary_dim must pass through. With --grad the gradient
of x is graded against the float64 reference backward R^T g (conformance/mrope/backward.py).
"""

from __future__ import annotations

from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.rotation_backward import RotationGradHooks
from conformance.core.tensors import adapter_inputs, check_tensor, mutation_problems
from conformance.mrope import backward as mrope_backward
from conformance.mrope import diagnosis
from conformance.mrope.rotation import reference, score
from conformance.mrope.spec import spec_of


class MropeApply(RotationGradHooks, Protocol):
    backward = mrope_backward  # --grad: the gradient of x, R^T g
    position_role = "positions"
    gradcheck_what = "x [1, 4, 1, 8] float64, Qwen2-VL sections (1, 1, 1) over rotary_dim 6, t positions 0, 1, 7, 1000"
    name = "mrope.apply"
    family = "mrope"
    signature = "fn(x, positions, spec) -> tensor like x"
    acceptable_note = "float32 angle rounding, growing with position"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, ("x",), ("positions",), dtype, device)
        return Prepared((*args, spec), inputs, watched, dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        x, pos = prepared.inputs_f64["x"], prepared.inputs_f64["positions"]
        out, problems, got = check_tensor(value, "the output", x.shape, prepared.dtype, prepared.device)
        problems += mutation_problems(prepared.watched)
        graded = Graded(problems=problems, output_f64=out, output_dtype=got)
        if out is None:
            return graded
        ref = reference(x, pos, spec)
        grade_profiles(graded, out, ref, "the output",
                       lambda profile, err: score(graded, profile, spec, prepared.dtype, x, pos, err))
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        b, s, h, d = index
        t, hh, w = (int(prepared.inputs_f64["positions"][k, b, s]) for k in range(3))
        return f"batch row {b}, token {s} (t {t}, h {hh}, w {w}), head {h}, dim {d}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        return diagnosis.diagnose(spec, prepared, graded, dtype)


PROTOCOL = MropeApply()
