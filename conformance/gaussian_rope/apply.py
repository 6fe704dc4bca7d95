"""Protocol ``gaussian_rope.apply``: ``fn(x, positions, spec) -> tensor like x``, K(m) R_m x.

RoPE's rotation grading (conformance.core.rotation_apply, shared with rope.apply) with the
amplitude hook: the reference is K(m) times the rotation's (conformance.core.rotation_reference),
the budgets scale with K(m) (conformance.core.rotation_budgets.amplitude_budgets, with the
kernel's error coefficient of conformance.gaussian_rope.kernel). Where K(m) underflows (seed
002's kernel past m = 771 in float64, much earlier in the dtypes under test) the expected output
is 0 or subnormal and the budget's floor admits a flush to zero.
"""

from __future__ import annotations

from conformance.core.rotation_apply import RotationApply
from conformance.core.rotation_backward import cotangent_f64
from conformance.gaussian_rope import backward, diagnosis
from conformance.gaussian_rope.kernel import amplitude, kernel_error
from conformance.gaussian_rope.spec import spec_of
from conformance.training import gradcheck_identity


class GaussianRopeApply(RotationApply):
    name = "gaussian_rope.apply"
    family = "gaussian_rope"

    def spec(self, case):
        return spec_of(case.params)

    def amplitude(self, positions, spec):
        return amplitude(positions, spec)

    def amplitude_error(self, positions, spec):
        return kernel_error(positions, spec.kernel)

    def reference(self, prepared, spec, layout: str):
        amp = self.amplitude(prepared.inputs_f64["positions"], spec)
        return super().reference(prepared, spec, layout) * amp[:, :, None, None]

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        return diagnosis.diagnose(spec, prepared, graded, dtype)

    def blackbox(self, invoker, dtype, device, probe) -> list:
        return []  # RoPE's checks assume norm preservation; the identities cover the kernel

    # -- training (--grad): conformance/gaussian_rope/backward.py --------------------------------
    # x and a cotangent like x, as rope.apply; the reference VJP and the budget carry K(m).

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        return {"x": backward.grade_apply(spec, prepared, cotangent_f64(cotangents[0], spec), grads.get("x"))}

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        if "x" not in graded:
            return []
        return backward.diagnose_apply(spec, dtype, cotangent_f64(cotangents[0], spec),
                                       prepared.inputs_f64["positions"], graded["x"].output_f64)

    def grad_blackbox(self, invoker, device, probe) -> list:
        layout = probe.blackbox_options.get("layout", "half") if probe is not None else "half"
        x, positions, spec = backward.apply_gradcheck_case(layout)
        return [gradcheck_identity(invoker, (x.to(device), positions.to(device), spec), (0,), device,
                                   f"{self.name}.gradcheck", f"x [1, 4, 1, 8] float64 at positions 0, 1, 7, 30 "
                                   f"({layout} layout, rotary_dim 6)")]


PROTOCOL = GaussianRopeApply()
