"""Protocol ``gaussian_rope.apply``: ``fn(x, positions, spec) -> tensor like x``, K(m) R_m x.

RoPE's rope.apply (conformance/rope/apply.py) with the amplitude hook: the reference is K(m)
times RoPE's (conformance.rope.reference), the budgets scale with K(m) (conformance.core.rotation_budgets
.amplitude_budgets). Where K(m) underflows (seed 002's kernel past m = 771 in float64, much earlier
in the dtypes under test) the expected output is 0 or subnormal and the budget's floor admits a
flush to zero.
"""

from __future__ import annotations

import numpy as np

from conformance.gaussian_rope.spec import spec_of
from conformance.rope.apply import RopeApply
from reference import gaussian_rope


def kernel_error(m, kernel) -> np.ndarray:
    """A(m) with |dK(m)| <= u A(m) for K computed with unit roundoff u: sum_j t_j (3 z_j + 5),
    t_j = a_j exp(-z_j), z_j = m^2 / (2 s_j^2). z_j computed with three roundings errs by 3u z_j
    (absolute), which exp turns into a relative error of 3u z_j, plus the exponential (2u), the
    product by a_j (u), the sum and a margin (2u). The exponent's error is what dominates far from
    the centre: at m = 127 with s1 = 5, z_1 = 322."""
    k = dict(kernel)
    m = np.asarray(m, dtype=np.float64)
    out = np.zeros(m.shape)
    for a, s in ((k["a1"], k["s1"]), (k["a2"], k["s2"])):
        z = m * m / (2.0 * s * s)
        out += a * np.exp(-z) * (3.0 * z + 5.0)
    return out


class GaussianRopeApply(RopeApply):
    name = "gaussian_rope.apply"
    family = "gaussian_rope"
    signature = "fn(x, positions, spec) -> tensor like x"
    acceptable_note = "float32 angle rounding, growing with position"

    def spec(self, case):
        return spec_of(case.params)

    def amplitude(self, positions, spec):
        return gaussian_rope.kernel(np.asarray(positions), dict(spec.kernel))

    def amplitude_error(self, positions, spec):
        return kernel_error(positions, spec.kernel)

    def reference(self, prepared, spec, layout: str) -> np.ndarray:
        amp = self.amplitude(prepared.inputs_f64["positions"], spec)
        return super().reference(prepared, spec, layout) * amp[:, :, None, None]

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        from conformance.gaussian_rope import diagnosis

        return diagnosis.diagnose(self, spec, prepared, graded, dtype)

    def blackbox(self, invoker, dtype, device, probe) -> list:
        return []  # RoPE's checks assume norm preservation; the identities cover the kernel

    # -- training (--grad): conformance/gaussian_rope/backward.py --------------------------------
    # grad_inputs and cotangents are RoPE's (x, a cotangent like x); the reference VJP and the
    # budget carry K(m).

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        from conformance.gaussian_rope.backward import grade_apply
        from conformance.core.rotation_backward import cotangent_f64

        return {"x": grade_apply(self, spec, prepared, cotangent_f64(cotangents[0], spec), grads.get("x"))}

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        from conformance.gaussian_rope.backward import diagnose_apply
        from conformance.core.rotation_backward import cotangent_f64

        if "x" not in graded:
            return []
        return diagnose_apply(self, spec, dtype, cotangent_f64(cotangents[0], spec),
                              prepared.inputs_f64["positions"], graded["x"].output_f64)

    def grad_blackbox(self, invoker, device, probe) -> list:
        from conformance.gaussian_rope.backward import apply_gradcheck_case
        from conformance.training import gradcheck_identity

        layout = probe.blackbox_options.get("layout", "half") if probe is not None else "half"
        x, positions, spec = apply_gradcheck_case(layout)
        return [gradcheck_identity(invoker, (x.to(device), positions.to(device), spec), (0,), device,
                                   f"{self.name}.gradcheck", f"x [1, 4, 1, 8] float64 at positions 0, 1, 7, 30 "
                                   f"({layout} layout, rotary_dim 6)")]


PROTOCOL = GaussianRopeApply()
