"""Protocol ``nope.apply``: ``fn(x, positions, spec) -> tensor like x``, which must be x.

x [batch, seq, heads, head_dim] in the dtype under test, positions int64 [batch, seq]. Graded
exactly: every element must equal the input (NaN for NaN); the identity map has no rounding, so
there is no budget to spend. Returning x itself or a copy both pass. With --grad the gradient of x
must be the cotangent itself, exactly (conformance/nope/backward.py).
"""

from __future__ import annotations

import numpy as np

from conformance.core import tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import adapter_inputs, argmax_index, check_tensor, finite_max, mutation_problems, \
    over_budget
from conformance.core.rotation_backward import as_f64, plain_cotangent
from conformance.nope.backward import diagnose_gradient, grade_gradient, gradcheck_case
from conformance.nope.exact import changed
from conformance.nope.spec import spec_of
from conformance.results import Diagnosis
from conformance.training import gradcheck_identity


class NopeApply(Protocol):
    name = "nope.apply"
    family = "nope"
    signature = "fn(x, positions, spec) -> tensor like x"
    acceptable_note = "none: a NoPE layer is exact"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, ("x",), ("positions",), dtype, device)
        return Prepared((*args, spec), inputs, watched, dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        x = prepared.inputs_f64["x"]
        out, problems, got = check_tensor(value, "the output", x.shape, prepared.dtype, prepared.device)
        problems += mutation_problems(prepared.watched)
        graded = Graded(problems=problems, output_f64=out, output_dtype=got)
        if out is None:
            return graded
        wrong = changed(out, x)
        graded.max_abs_error = finite_max(np.where(wrong, np.abs(out - x), 0.0))
        ratio = np.where(wrong, 2.0, 0.0)  # exact: any change is over budget
        for profile in tolerance.PROFILES:
            graded.ratio[profile] = float(ratio.max(initial=0.0))
            graded.worst_index[profile] = argmax_index(ratio) if ratio.size else None
            graded.mismatch[profile] = over_budget(ratio) + ("values",)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        b, s, h, d = index
        return f"batch row {b}, position {int(prepared.inputs_f64['positions'][b, s])} (token {s}), head {h}, dim {d}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        x, out = prepared.inputs_f64["x"], graded.output_f64
        if out is None or not np.all(np.isfinite(out)) or not np.all(np.isfinite(x)):
            return []
        tol = 16 * tolerance.table_roundoff(dtype, "standard")
        delta = out - x
        if x.shape[2] > 1 and np.max(np.ptp(delta, axis=2)) <= tol * max(1.0, float(np.max(np.abs(delta)))):
            return [Diagnosis("nope-position-added", "the output is x plus a vector that depends on the token "
                              "only, the same for every head: an absolute position table added in a NoPE layer")]
        d = x.shape[-1] - x.shape[-1] % 2
        for layout, (a, b) in (("half", (np.s_[..., : d // 2], np.s_[..., d // 2: d])),
                               ("interleaved", (np.s_[..., 0:d:2], np.s_[..., 1:d:2]))):
            norm_in = np.hypot(x[a], x[b])
            norm_out = np.hypot(out[a], out[b])
            if np.all(np.abs(norm_out - norm_in) <= tol * norm_in):
                return [Diagnosis("nope-rope-applied", f"every {layout}-layout pair keeps its length but turns: "
                                  "RoPE applied in a layer that takes no positional encoding")]
        return []

    # -- training (--grad): conformance/nope/backward.py ------------------------------------------

    differentiable = True

    def grad_inputs(self, case, spec, prepared) -> dict:
        return {"x": 0}

    def cotangents(self, case, spec, prepared) -> tuple:
        return (plain_cotangent(case.id, prepared.inputs_f64["x"].shape, prepared.dtype, prepared.device),)

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        return {"x": grade_gradient(prepared, as_f64(cotangents[0]), grads.get("x"))}

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        if "x" not in graded:
            return []
        return diagnose_gradient(dtype, as_f64(cotangents[0]), graded["x"].output_f64)

    def grad_blackbox(self, invoker, device, probe) -> list:
        x, positions, spec = gradcheck_case()
        return [gradcheck_identity(invoker, (x.to(device), positions.to(device), spec), (0,), device,
                                   "nope.apply.gradcheck", "x [1, 4, 1, 8] float64 at positions 0, 1, 7, 1000")]


PROTOCOL = NopeApply()
