"""RoPE's backward pass for ``--grad`` (rope.apply): the reference VJP, its grading and diagnosis.

Formula. rope.apply is linear in x: y = f R_m x on each rotated pair (f the attention factor of a
scaled case, 1 without one) and y = x on the tail. Its vector-Jacobian product with a cotangent g
is the transpose, f R_m^T g = f R_{-m} g on the pairs and g on the tail (RoFormer, arXiv
2104.09864, eqs. 15-16; reference/rope/backward.py derives it). Computed here from the forward's
own cached table (conformance.core.rotation_reference.tables: cos and sin already carry f) as the
transposed rotation rotate_pairs(g, cos, -sin): for a dynamic scaling the frequencies depend on
spec.seq_len, never on the sign of the positions, so the table of +m is the right one. This is
bit for bit ``reference.rope.backward.apply_vjp`` (identity rope.backward-is-inverse-rotation;
tests/rope/test_rope_grad.py checks it here too).

Budget. Autograd runs the forward's arithmetic on the cotangent pair (g_a, g_b) with the same
cos/sin (two products and a sum per element; a recomputing or fused backward rounds the same
formulas again), and |(-m) theta| = |m theta|: the gradient's budget is the forward's per-pair
rotation budget (conformance.core.rotation_budgets) with |g_a| + |g_b| in place of |a| + |b|, and the
passthrough budget of g on the tail (docs/tolerance.md, "Gradients").

Diagnosis (core codes, conformance/core/codes.py): a gradient over budget is compared with the
usual wrong backwards, each graded with the same budget: R_m g (backward-transposed), the
transposed rotation in the other layout (backward-layout), zeros or a zero tail
(backward-missing), the right rotation without f, with f twice, or any constant multiple c
(backward-scale). Shapes: g, gradients [batch, seq, heads, head_dim] float64 (canonical bshd frame).
"""

from __future__ import annotations

import numpy as np

from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded
from conformance.core.tensors import abs_error, check_tensor
from conformance.core.rotation_backward import (cotangent_f64, cotangent_tensor, explain_gradient,
                                                missing_gradient)
from conformance.core.rotation_spec import from_layout, layout_shape
from conformance.core import rotation_reference as reference
from conformance.rope.spec import RopeSpec
from reference import rope


def rope_vjp(g, positions, spec, layout: str) -> np.ndarray:
    """grad_x = f R_{-m} g on the pairs, g on the tail; g float64 [b, s, h, d], positions [b, s]."""
    t = reference.tables(positions, spec)
    return rope.rotate_pairs(np.asarray(g, dtype=np.float64), t.cos, -t.sin, layout=layout,
                             rotary_dim=spec.rotary_dim)


def forward_on(g, positions, spec, layout: str) -> np.ndarray:
    """f R_m g: the forward applied to the cotangent (what a backward that reuses the forward gives)."""
    return reference.apply(np.asarray(g, dtype=np.float64), positions, spec, layout)


def grade_gradient(proto, spec, prepared, x_shape, positions, g, grad, role: str) -> Graded:
    """Graded of one input's gradient: the forward's per-pair budget with g for x.

    proto: the RopeApply whose ``ratios`` grades (it reads the budget dtype from its argument);
    g: the float64 cotangent [b, s, h, d]; grad: the tensor autograd returned, or None."""
    what = f"the gradient of {role}"
    if grad is None:
        return missing_gradient(role)
    out, problems, got = check_tensor(grad, what, layout_shape(x_shape, spec), None, prepared.device)
    graded = Graded(problems=problems, output_dtype=got)
    if out is None:
        return graded
    out = from_layout(out, spec)
    graded.output_f64 = out
    ref = rope_vjp(g, positions, spec, spec.layout)

    def fill(profile, err):
        proto.ratios(graded, profile, spec, prepared.dtype, g, positions, err)

    grade_profiles(graded, out, ref, what, fill)
    graded.notes = {}  # the forward's off-by-one note speaks of x, not of g
    return graded


def _ratio(proto, spec, dtype, g, positions, got, candidate) -> float:
    scratch = Graded()
    proto.ratios(scratch, "standard", spec, dtype, g, positions, abs_error(got, candidate))
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
    def ratio_of(cand, cand_spec):
        return _ratio(proto, cand_spec or spec, dtype, g, positions, got, cand)

    return explain_gradient(ratio_of, got, rope_vjp(g, positions, spec, spec.layout), candidates(g, positions, spec),
                            role)


def gradcheck_case(layout: str):
    """A small float64 case for torch.autograd.gradcheck: (x, positions, spec). Positions 0, 1, 7 and
    1000 (m = 0 alone cannot tell R_m from R_{-m}); head_dim 8 with rotary_dim 6 (a tail too)."""
    import torch

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
