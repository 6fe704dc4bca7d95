"""Protocol ``rope.apply``: ``fn(x, positions, spec) -> tensor like x``.

x [batch, seq, heads, head_dim] in the dtype under test, positions int64 [batch, seq] on the same
device; cases of another ``spec.tensor_layout`` hand x over as [batch, heads, seq, head_dim]
("bhsd") or token-flattened [total_tokens, heads, head_dim] with positions [total_tokens] and
``spec.cu_seqlens`` ("thd"), and the output is expected in the same layout (conformance.rope.spec).
With ``spec.inplace`` the adapter may write into x and return x or None: the written x is graded
(every call gets a fresh x). Graded per pair (error of a pair = the larger of its two elements' errors) against the
reference applied to the dtype-rounded x, with the rotation budget of conformance.core.rotation_budgets;
elements past rotary_dim must come back unchanged (passthrough budget). The probe detects the
pair layout (conformance.core.layout_probe). The grading is conformance.core.rotation_apply's, shared
with gaussian_rope.apply.
"""

from __future__ import annotations

from conformance.core.rotation_apply import RotationApply
from conformance.core.rotation_backward import cotangent_f64
from conformance.rope import blackbox, diagnosis
from conformance.rope.backward import diagnose_gradient, grade_gradient, gradcheck_case
from conformance.rope.spec import spec_of
from conformance.training import gradcheck_identity


class RopeApply(RotationApply):
    name = "rope.apply"
    family = "rope"

    def spec(self, case):
        return spec_of(case.params)

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        return diagnosis.explain(diagnosis.diagnose_apply, prepared.inputs_f64["x"],
                                 prepared.inputs_f64["positions"], graded.output_f64, spec, dtype)

    def blackbox(self, invoker, dtype, device, probe) -> list:
        layout = probe.blackbox_options.get("layout", "half") if probe is not None else "half"
        return blackbox.apply_checks(invoker, self.name, dtype, device, layout)

    # -- training (--grad): conformance/rope/backward.py ----------------------------------------

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        g = cotangent_f64(cotangents[0], spec)
        x = prepared.inputs_f64["x"]
        return {"x": grade_gradient(self, spec, prepared, x.shape, prepared.inputs_f64["positions"], g,
                                    grads.get("x"), "x")}

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        if "x" not in graded:
            return []
        return diagnose_gradient(self, spec, dtype, cotangent_f64(cotangents[0], spec),
                                 prepared.inputs_f64["positions"], graded["x"].output_f64, "x")

    def grad_blackbox(self, invoker, device, probe) -> list:
        layout = probe.blackbox_options.get("layout", "half") if probe is not None else "half"
        x, positions, spec = gradcheck_case(layout)
        return [gradcheck_identity(invoker, (x.to(device), positions.to(device), spec), (0,), device,
                                   "rope.apply.gradcheck", f"x [1, 4, 1, 8] float64 at positions 0, 1, 7, 1000 "
                                   f"({layout} layout, rotary_dim 6)")]


PROTOCOL = RopeApply()
