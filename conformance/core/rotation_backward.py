"""The family-free pieces of grading a gradient under ``--grad`` (conformance.training), shared by
the rotary families and the others: cotangents as tensors and back in float64 (in a rotary case's
tensor layout, conformance.core.rotation_spec, or plainly), the Graded of a missing gradient, the
naming of a failing gradient among the usual wrong backwards (core codes backward-transposed,
backward-layout, backward-missing, backward-scale: conformance/core/codes.py) and the training
hooks of a protocol that turns x pair by pair (``RotationGradHooks``). torch is imported inside
functions only (its start-up cost stays out of ``posref --help``).
"""

from __future__ import annotations

import numpy as np

from conformance.core.protocol import Graded
from conformance.core.rotation_spec import from_layout, to_layout
from conformance.core.tensors import torch_dtype
from conformance.results import Diagnosis
from conformance.training import cotangent, gradcheck_identity


def cotangent_tensor(case_id: str, shape, spec, dtype: str, device: str, index: int = 0):
    """The case's cotangent as a tensor in the adapter's layout (conformance.training.cotangent)."""
    import torch

    g = torch.from_numpy(cotangent(case_id, shape, dtype, index)).to(dtype=torch_dtype(dtype))
    g_a, _ = to_layout(g, np.zeros(shape[:2], dtype=np.int64), spec)
    return g_a.contiguous().clone().to(device)


def cotangent_f64(g_tensor, spec) -> np.ndarray:
    """A cotangent tensor as the backward received it, float64 in the canonical frame."""
    import torch

    return from_layout(g_tensor.detach().to("cpu", torch.float64).numpy(), spec)


def plain_cotangent(case_id: str, shape, dtype: str, device: str):
    """The case's cotangent (conformance.training.cotangent) as a tensor in the dtype under test,
    for an output shaped like its input (no tensor layouts)."""
    import torch

    return torch.from_numpy(cotangent(case_id, shape, dtype)).to(dtype=torch_dtype(dtype)).to(device)


def as_f64(tensor) -> np.ndarray:
    """A cotangent tensor as the backward received it, float64 numpy."""
    import torch

    return tensor.detach().to("cpu", torch.float64).numpy()


def missing_gradient(role: str) -> Graded:
    """The Graded of an input autograd returned no gradient for (None)."""
    return Graded(problems=[Diagnosis("backward-missing", f"no gradient reaches {role} (autograd returned None: "
                                      "the output does not depend on it through autograd)")])


def explain_gradient(ratio_of, got, ref, cands, role: str) -> list:
    """Diagnoses of a failing gradient ``got`` (float64) whose right value is ``ref``.

    cands: [(code, message, float64 wrong gradient, budget key)]; ratio_of(candidate, key) is the
    budget ratio of |got - candidate| with the gradient's own budget (key: what that budget needs,
    e.g. the spec of the candidate's pair layout). A candidate within budget names its code (first
    of each code); without one, the least-squares c of got ~ c ref, when c ref is within budget,
    is backward-scale."""
    if not np.any(got) and np.any(ref):
        return [Diagnosis("backward-missing", f"{role}: the gradient is zero everywhere: nothing flows back")]
    found, seen = [], set()
    for code, message, cand, key in cands:
        if code in seen or not np.all(np.isfinite(cand)):
            continue
        if ratio_of(cand, key) <= 1.0:
            found.append(Diagnosis(code, f"{role}: {message}"))
            seen.add(code)
    if not found:
        den = float(np.vdot(ref, ref))
        if den > 0.0 and np.all(np.isfinite(got)):
            c = float(np.vdot(got, ref)) / den
            if abs(c - 1.0) > 1e-3 and ratio_of(c * ref, None) <= 1.0:
                found.append(Diagnosis("backward-scale", f"{role}: the gradient is {c:.6g} times the right one"))
    return found


class RotationGradHooks:
    """The training hooks of a protocol whose float input x (argument 0) is turned pair by pair
    by per-pair angles read from ``position_role`` (mrope.apply, rope2d.apply): the gradient of
    x against the family's R^T g. ``backward`` is the family's backward module (imported by the
    protocol's module), which gives ``grade_gradient(spec, prepared, g, grad)``,
    ``diagnose_gradient(spec, dtype, g, positions, got)`` and ``gradcheck_case()``;
    ``gradcheck_what`` describes the gradcheck's case. Put it before Protocol in the bases."""

    differentiable = True
    backward = None
    position_role = "positions"
    gradcheck_what = ""

    def grad_inputs(self, case, spec, prepared) -> dict:
        return {"x": 0}

    def cotangents(self, case, spec, prepared) -> tuple:
        return (plain_cotangent(case.id, prepared.inputs_f64["x"].shape, prepared.dtype, prepared.device),)

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        return {"x": self.backward.grade_gradient(spec, prepared, as_f64(cotangents[0]), grads.get("x"))}

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        if "x" not in graded:
            return []
        return self.backward.diagnose_gradient(spec, dtype, as_f64(cotangents[0]),
                                               prepared.inputs_f64[self.position_role], graded["x"].output_f64)

    def grad_blackbox(self, invoker, device, probe) -> list:
        x, where, spec = self.backward.gradcheck_case()
        return [gradcheck_identity(invoker, (x.to(device), where.to(device), spec), (0,), device,
                                   f"{self.name}.gradcheck", self.gradcheck_what)]
