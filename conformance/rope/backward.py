"""RoPE's backward pass for ``--grad`` (rope.apply): the reference VJP, its grading and diagnosis.

Formula. rope.apply is linear in x: y = f R_m x on each rotated pair (f the attention factor of a
scaled case, 1 without one) and y = x on the tail. Its vector-Jacobian product with a cotangent g
is the transpose, f R_m^T g = f R_{-m} g on the pairs and g on the tail (RoFormer, arXiv
2104.09864, eqs. 15-16; reference/rope/backward.py derives it). Computed here from the forward's
own cached table (conformance.rope.reference.tables: cos and sin already carry f) as the
transposed rotation rotate_pairs(g, cos, -sin): for a dynamic scaling the frequencies depend on
spec.seq_len, never on the sign of the positions, so the table of +m is the right one. This is
bit for bit ``reference.rope.backward.apply_vjp`` (identity rope.backward-is-inverse-rotation;
tests/rope/test_rope_grad.py checks it here too).

Budget. Autograd runs the forward's arithmetic on the cotangent pair (g_a, g_b) with the same
cos/sin (two products and a sum per element; a recomputing or fused backward rounds the same
formulas again), and |(-m) theta| = |m theta|: the gradient's budget is the forward's per-pair
rotation budget (conformance.rope.budgets) with |g_a| + |g_b| in place of |a| + |b|, and the
passthrough budget of g on the tail (docs/tolerance.md, "Gradients").

Diagnosis (core codes, conformance/core/codes.py): a gradient over budget is compared with the
usual wrong backwards, each graded with the same budget: R_m g (backward-transposed), the
transposed rotation in the other layout (backward-layout), zeros or a zero tail
(backward-missing), the right rotation without f, with f twice, or any constant multiple c
(backward-scale). Shapes: g, gradients [batch, seq, heads, head_dim] float64 (canonical bshd frame).
"""

from __future__ import annotations

import numpy as np

from conformance.core.protocol import Graded
from conformance.core.tensors import abs_error, check_tensor, finite_max, nonfinite_problem
from conformance.results import Diagnosis
from conformance.rope import reference
from conformance.rope.spec import from_layout, layout_shape, to_layout


def rope_vjp(g, positions, spec, layout: str) -> np.ndarray:
    """grad_x = f R_{-m} g on the pairs, g on the tail; g float64 [b, s, h, d], positions [b, s]."""
    from reference import rope

    t = reference.tables(positions, spec)
    return rope.rotate_pairs(np.asarray(g, dtype=np.float64), t.cos, -t.sin, layout=layout,
                             rotary_dim=spec.rotary_dim)


def forward_on(g, positions, spec, layout: str) -> np.ndarray:
    """f R_m g: the forward applied to the cotangent (what a backward that reuses the forward gives)."""
    return reference.apply(np.asarray(g, dtype=np.float64), positions, spec, layout)


def cotangent_tensor(case_id: str, shape, spec, dtype: str, device: str, index: int = 0):
    """The case's cotangent as a tensor in the adapter's layout (conformance.training.cotangent)."""
    import torch

    from conformance.core.tensors import torch_dtype
    from conformance.training import cotangent

    g = torch.from_numpy(cotangent(case_id, shape, dtype, index)).to(dtype=torch_dtype(dtype))
    g_a, _ = to_layout(g, np.zeros(shape[:2], dtype=np.int64), spec)
    return g_a.contiguous().clone().to(device)


def cotangent_f64(g_tensor, spec) -> np.ndarray:
    """A cotangent tensor as the backward received it, float64 in the canonical frame."""
    import torch

    return from_layout(g_tensor.detach().to("cpu", torch.float64).numpy(), spec)


def grade_gradient(proto, spec, prepared, x_shape, positions, g, grad, role: str) -> Graded:
    """Graded of one input's gradient: the forward's per-pair budget with g for x.

    proto: the RopeApply whose ``_ratios`` grades (it reads the budget dtype from its argument);
    g: the float64 cotangent [b, s, h, d]; grad: the tensor autograd returned, or None."""
    what = f"the gradient of {role}"
    if grad is None:
        return Graded(problems=[Diagnosis("backward-missing", f"no gradient reaches {role} (autograd returned "
                                          "None: the output does not depend on it through autograd)")])
    out, problems, got = check_tensor(grad, what, layout_shape(x_shape, spec), None, prepared.device)
    graded = Graded(problems=problems, output_dtype=got)
    if out is None:
        return graded
    out = from_layout(out, spec)
    graded.output_f64 = out
    ref = rope_vjp(g, positions, spec, spec.layout)
    bad = nonfinite_problem(out, ref, what)
    if bad is not None:
        graded.problems.append(bad)
    err = abs_error(out, ref)
    graded.max_abs_error = finite_max(err)
    from conformance.core import tolerance

    for profile in tolerance.PROFILES:
        proto._ratios(graded, profile, spec, prepared.dtype, g, positions, err)
    graded.notes = {}  # the forward's off-by-one note speaks of x, not of g
    return graded


def _ratio(proto, spec, dtype, g, positions, got, candidate) -> float:
    scratch = Graded()
    proto._ratios(scratch, "standard", spec, dtype, g, positions, abs_error(got, candidate))
    r = scratch.ratio.get("standard")
    return np.inf if r is None else float(r)


def candidates(g, positions, spec) -> list:
    """[(code, message, float64 gradient, spec whose pair layout its budget uses)]: the wrong
    backwards a gradient is compared with."""
    import dataclasses

    layout, r, d = spec.layout, spec.rotary_dim, g.shape[-1]
    ref = rope_vjp(g, positions, spec, layout)
    out = [("backward-transposed", "the gradient is R_m g, the forward applied to the cotangent, instead of "
            "R_m^T g = R_{-m} g: the backward reuses the forward rotation (sin with the wrong sign)",
            forward_on(g, positions, spec, layout), spec)]
    if r >= 4:
        other = "interleaved" if layout == "half" else "half"
        out.append(("backward-layout", f"the gradient pairs dims in the {other} layout while the forward uses "
                    f"{layout}: the backward's pair layout differs from the forward's",
                    rope_vjp(g, positions, spec, other), dataclasses.replace(spec, layout=other)))
    out.append(("backward-missing", "the gradient is zero: nothing flows back to the input", np.zeros_like(ref), spec))
    if r < d:
        tail = ref.copy()
        tail[..., r:] = 0.0
        out.append(("backward-missing", f"the gradient of the pass-through dims {r}..{d - 1} is zero (the tail "
                    "past rotary_dim is dropped in the backward)", tail, spec))
    f = reference.tables(positions, spec).attention_factor
    if f != 1.0:
        out.append(("backward-scale", f"the gradient lacks the attention factor f = {f:.6g} (the forward "
                    "applies it, the backward does not)", ref / f, spec))
        out.append(("backward-scale", f"the gradient carries the attention factor f = {f:.6g} twice", ref * f, spec))
    return out


def diagnose_gradient(proto, spec, dtype, g, positions, got, role: str) -> list:
    """Diagnoses of a failing gradient (float64 [b, s, h, d])."""
    found, seen = [], set()
    ref = rope_vjp(g, positions, spec, spec.layout)
    if not np.any(got) and np.any(ref):
        return [Diagnosis("backward-missing", f"{role}: the gradient is zero everywhere: nothing flows back")]
    for code, message, cand, cand_spec in candidates(g, positions, spec):
        if code in seen or not np.all(np.isfinite(cand)):
            continue
        if _ratio(proto, cand_spec, dtype, g, positions, got, cand) <= 1.0:
            found.append(Diagnosis(code, f"{role}: {message}"))
            seen.add(code)
    if not found:
        # Reference-free fit: the gradient is c times the right one.
        den = float(np.vdot(ref, ref))
        if den > 0.0 and np.all(np.isfinite(got)):
            c = float(np.vdot(got, ref)) / den
            if abs(c - 1.0) > 1e-3 and _ratio(proto, spec, dtype, g, positions, got, c * ref) <= 1.0:
                found.append(Diagnosis("backward-scale", f"{role}: the gradient is {c:.6g} times the right one"))
    return found


def gradcheck_case(layout: str):
    """A small float64 case for torch.autograd.gradcheck: (x, positions, spec). Positions 0, 1, 7 and
    1000 (m = 0 alone cannot tell R_m from R_{-m}); head_dim 8 with rotary_dim 6 (a tail too)."""
    import torch

    from conformance.rope.spec import RopeSpec

    spec = RopeSpec(head_dim=8, rotary_dim=6, base=10000.0, layout=layout)
    gen = torch.Generator().manual_seed(15)
    x = torch.randn(1, 4, 1, 8, generator=gen, dtype=torch.float64)
    positions = torch.tensor([[0, 1, 7, 1000]], dtype=torch.int64)
    return x, positions, spec


# ------------------------------------------------------------------------------------------
# rope.apply_qk: q and k each graded as rope.apply's x. conformance/rope/apply_qk.py can delegate
# its training hooks here (grad_inputs: {"q": 0, "k": 1}, {} for in-place cases).

QK_ROLES = ("q", "k")


def qk_cotangents(case, spec, prepared) -> tuple:
    """(g_q, g_k): two streams of the case (g_k has index 1), in the adapter's layout."""
    return tuple(cotangent_tensor(case.id, prepared.inputs_f64[role].shape, spec, prepared.dtype, prepared.device,
                                  index=i) for i, role in enumerate(QK_ROLES))


def qk_grade_backward(one, case, spec, prepared, cotangents, grads) -> dict:
    """{"q": Graded, "k": Graded}; one: the RopeApply grading each; prepared.dtype is the budget's."""
    out = {}
    for i, role in enumerate(QK_ROLES):
        g = cotangent_f64(cotangents[i], spec)
        x = prepared.inputs_f64[role]
        out[role] = grade_gradient(one, spec, prepared, x.shape, prepared.inputs_f64["positions"], g,
                                   grads.get(role), role)
    return out


def qk_diagnose_backward(one, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
    found = []
    for i, role in enumerate(QK_ROLES):
        ratio = graded[role].ratio.get("standard") if role in graded else 0.0
        if ratio is None or ratio > 1.0:
            found += diagnose_gradient(one, spec, dtype, cotangent_f64(cotangents[i], spec),
                                       prepared.inputs_f64["positions"], graded[role].output_f64, role)
    return found


# ------------------------------------------------------------------------------------------
# Family-free pieces of a rotation's backward grading (mrope, rope2d, nope use them).


def plain_cotangent(case_id: str, shape, dtype: str, device: str):
    """The case's cotangent (conformance.training.cotangent) as a tensor in the dtype under test,
    for an output shaped like its input (no tensor layouts)."""
    import torch

    from conformance.core.tensors import torch_dtype
    from conformance.training import cotangent

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
    x against the family's R^T g. ``backward_module`` names the family's module that gives
    ``grade_gradient``, ``diagnose_gradient`` and ``gradcheck_case``; ``gradcheck_what`` describes
    the gradcheck's case. Put it before Protocol in the bases."""

    differentiable = True
    backward_module = ""
    position_role = "positions"
    gradcheck_what = ""

    def _backward(self):
        import importlib

        return importlib.import_module(self.backward_module)

    def grad_inputs(self, case, spec, prepared) -> dict:
        return {"x": 0}

    def cotangents(self, case, spec, prepared) -> tuple:
        return (plain_cotangent(case.id, prepared.inputs_f64["x"].shape, prepared.dtype, prepared.device),)

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        return {"x": self._backward().grade_gradient(spec, prepared, as_f64(cotangents[0]), grads.get("x"))}

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        if "x" not in graded:
            return []
        return self._backward().diagnose_gradient(spec, dtype, as_f64(cotangents[0]),
                                                  prepared.inputs_f64[self.position_role], graded["x"].output_f64)

    def grad_blackbox(self, invoker, device, probe) -> list:
        from conformance.training import gradcheck_identity

        x, where, spec = self._backward().gradcheck_case()
        return [gradcheck_identity(invoker, (x.to(device), where.to(device), spec), (0,), device,
                                   f"{self.name}.gradcheck", self.gradcheck_what)]
