"""M-RoPE's backward pass for ``--grad`` (mrope.apply): the reference VJP, its grading and diagnosis.

Formula. mrope.apply turns pair i of a token by p_s(i) theta_i, p_s the token's position in the
pair's stream s(i) (t, h or w): a block-diagonal rotation R, the tail copied. It is linear in x, so
the VJP with a cotangent g is R^T g, each pair turned back by its own angle (M-RoPE at the negated
positions of every stream), g on the tail: ``reference.mrope.backward.apply_vjp`` (identities
mrope.backward-*, tests/mrope/test_mrope_backward.py).

Budget. Autograd of the forward (Qwen2-VL's x cos + rotate_half(x) sin, or a hand-written
Function that saves cos and sin) computes R^T g with the forward's own table: per element two
products and a sum on the cotangent pair (g_a, g_b), the same table rounding and the same angle
error, at |(-p) theta_i| = |p theta_i|. The gradient's budget is therefore the forward's per-pair
rotation budget (conformance.mrope.rotation.score, conformance.core.rotation_budgets) with |g_a| + |g_b| in
place of |a| + |b|, and the passthrough budget of g on the tail (docs/tolerance.md, "Gradients").

Diagnosis (core codes): R g, the forward reused (backward-transposed); R^T g paired in the other
layout (backward-layout); zeros, or a zero tail (backward-missing); 2 R^T g or any c R^T g
(backward-scale). Shapes: g and gradients [batch, seq, heads, head_dim] float64, positions
[3, batch, seq].
"""

from __future__ import annotations

import dataclasses

import numpy as np

from conformance.core.protocol import Graded
from conformance.core.grading import grade_profiles
from conformance.core.tensors import abs_error, check_tensor
from conformance.mrope.rotation import score
from conformance.core.rotation_backward import explain_gradient, missing_gradient
from conformance.mrope.spec import MropeSpec
from reference.mrope import backward as reference_backward


def vjp(g, positions, spec, layout=None) -> np.ndarray:
    """grad_x = R^T g (float64 like g); layout: the pair layout (default the spec's)."""
    return reference_backward.apply_vjp(np.asarray(g, dtype=np.float64), positions,
                                        mrope_section=spec.mrope_section, variant=spec.variant,
                                        rotary_dim=spec.rotary_dim, base=spec.base, layout=layout or spec.layout,
                                        backend="numpy")


def grade_gradient(spec, prepared, g, grad) -> Graded:
    """Graded of x's gradient (tensor or None) against R^T g, with the budget of g."""
    if grad is None:
        return missing_gradient("x")
    x_shape, pos = prepared.inputs_f64["x"].shape, prepared.inputs_f64["positions"]
    out, problems, got = check_tensor(grad, "the gradient of x", x_shape, None, prepared.device)
    graded = Graded(problems=problems, output_f64=out, output_dtype=got)
    if out is None:
        return graded
    ref = vjp(g, pos, spec)
    grade_profiles(graded, out, ref, "the gradient of x",
                   lambda profile, err: score(graded, profile, spec, prepared.dtype, g, pos, err))
    return graded


def candidates(g, positions, spec) -> list:
    """[(code, message, wrong gradient, spec of its budget)]: reference.mrope.backward's mutants,
    and the tail past rotary_dim dropped."""
    other = "interleaved" if spec.layout == "half" else "half"
    found = reference_backward.mutants(g, positions, mrope_section=spec.mrope_section, variant=spec.variant,
                                       rotary_dim=spec.rotary_dim, base=spec.base, layout=spec.layout)
    out = []
    for code, wrong in found.items():
        for message, grad in wrong:
            out.append((code, message, grad, dataclasses.replace(spec, layout=other) if code == "backward-layout"
                        else spec))
    r, d = spec.rotary_dim, g.shape[-1]
    if r < d:
        tail = vjp(g, positions, spec)
        tail[..., r:] = 0.0
        out.append(("backward-missing", f"the gradient of the pass-through dims {r}..{d - 1} is zero", tail, spec))
    return out


def diagnose_gradient(spec, dtype, g, positions, got) -> list:
    def ratio_of(candidate, cand_spec):
        scratch = Graded()
        score(scratch, "standard", cand_spec or spec, dtype, g, positions, abs_error(got, candidate))
        r = scratch.ratio.get("standard")
        return np.inf if r is None else float(r)

    return explain_gradient(ratio_of, got, vjp(g, positions, spec), candidates(g, positions, spec), "x")


def gradcheck_case():
    """(x [1, 4, 1, 8] float64, positions [3, 1, 4], spec): Qwen2-VL sections (1, 1, 1) over
    rotary_dim 6 (a tail too), the streams at different positions (up to 1000) so that neither a
    stream mix-up nor R for R^T goes unseen."""
    import torch

    spec = MropeSpec(head_dim=8, rotary_dim=6, base=10000.0, layout="half", mrope_section=(1, 1, 1),
                     variant="qwen2")
    x = torch.randn(1, 4, 1, 8, generator=torch.Generator().manual_seed(15), dtype=torch.float64)
    positions = torch.tensor([[[0, 1, 7, 1000]], [[0, 3, 2, 40]], [[0, 5, 11, 9]]], dtype=torch.int64)
    return x, positions, spec
