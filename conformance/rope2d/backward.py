"""Axial 2-D RoPE's backward pass for ``--grad`` (rope2d.apply): reference VJP, grading, diagnosis.

Formula. rope2d.apply turns pair i of a patch at integer coordinates c = (x, y) by phi_i(c), linear
in c (c_a(i) theta_k, axial; x f_x[h, i] + y f_y[h, i], RoPE-Mixed), and copies the leading CLS
tokens: a block-diagonal rotation R, linear in the patch vector. The VJP with a cotangent g is
R^T g, each pair turned back by its own angle (apply at -c), g on the CLS tokens:
``reference.rope2d.backward.apply_vjp`` (identities rope2d.backward-*,
tests/rope2d/test_rope2d_backward.py). RoPE-Mixed's frequencies are part of the spec, not an input:
only x's gradient is graded.

Budget. Autograd of the forward (x cos + rotate(x) sin with the two axes' tables, or a
hand-written Function that saves cos and sin) computes R^T g with the forward's own table: per
element two products and a sum on the cotangent pair (g_a, g_b), the same table rounding and angle
error at |-phi| = |phi|. The gradient's budget is the forward's per-pair budget
(conformance.rope2d.rotation.score: each axis RoPE's rotation budget for its ladder of d/4
frequencies) with |g_a| + |g_b| in place of |a| + |b|, and the passthrough budget of g on the CLS
tokens (docs/tolerance.md, "Gradients").

Diagnosis (core codes): R g (backward-transposed), R^T g in the other pair layout
(backward-layout), zeros or CLS tokens without gradient (backward-missing), 2 R^T g or any c R^T g
(backward-scale). Shapes: g and gradients [batch, seq, heads, head_dim] float64, coords
[batch, seq, 2].
"""

from __future__ import annotations

import dataclasses

import numpy as np

from conformance.core.protocol import Graded
from conformance.core.grading import grade_profiles
from conformance.core.tensors import abs_error, check_tensor
from conformance.core.rotation_backward import explain_gradient, missing_gradient
from conformance.rope2d.rotation import score
from conformance.rope2d.spec import Rope2dSpec
from reference.rope2d import backward as reference_backward


def _kw(spec) -> dict:
    return dict(base=spec.base, order=spec.order, cls_tokens=spec.cls_tokens,
                freqs=None if spec.freqs is None else np.array(spec.freqs), backend="numpy")


def vjp(g, coords, spec, layout=None) -> np.ndarray:
    """grad_x = R^T g (float64 like g); layout: the pair layout (default the spec's)."""
    return reference_backward.apply_vjp(np.asarray(g, dtype=np.float64), coords, layout=layout or spec.layout,
                                        **_kw(spec))


def grade_gradient(spec, prepared, g, grad) -> Graded:
    """Graded of x's gradient (tensor or None) against R^T g, with the budget of g."""
    if grad is None:
        return missing_gradient("x")
    x_shape, coords = prepared.inputs_f64["x"].shape, prepared.inputs_f64["coords"]
    out, problems, got = check_tensor(grad, "the gradient of x", x_shape, None, prepared.device)
    graded = Graded(problems=problems, output_f64=out, output_dtype=got)
    if out is None:
        return graded
    ref = vjp(g, coords, spec)
    grade_profiles(graded, out, ref, "the gradient of x",
                   lambda profile, err: score(graded, profile, spec, prepared.dtype, g, coords, err))
    return graded


def candidates(g, coords, spec) -> list:
    """[(code, message, wrong gradient, spec of its budget)]: reference.rope2d.backward's mutants
    (with CLS tokens: their gradient dropped)."""
    other = "interleaved" if spec.layout == "half" else "half"
    out = []
    for code, wrong in reference_backward.mutants(g, coords, layout=spec.layout, **_kw(spec)).items():
        for message, grad in wrong:
            out.append((code, message, grad, dataclasses.replace(spec, layout=other) if code == "backward-layout"
                        else spec))
    return out


def diagnose_gradient(spec, dtype, g, coords, got) -> list:
    def ratio_of(candidate, cand_spec):
        scratch = Graded()
        score(scratch, "standard", cand_spec or spec, dtype, g, coords, abs_error(got, candidate))
        r = scratch.ratio.get("standard")
        return np.inf if r is None else float(r)

    return explain_gradient(ratio_of, got, vjp(g, coords, spec), candidates(g, coords, spec), "x")


def gradcheck_case(layout: str = "interleaved"):
    """(x [1, 5, 1, 8] float64, coords [1, 5, 2], spec): one CLS token and four patches, the two
    coordinates different (up to 30) so that R for R^T and an axis mix-up both show."""
    import torch

    spec = Rope2dSpec(head_dim=8, base=100.0, layout=layout, order=("x", "y"), cls_tokens=1)
    x = torch.randn(1, 5, 1, 8, generator=torch.Generator().manual_seed(15), dtype=torch.float64)
    coords = torch.tensor([[[0, 0], [1, 0], [0, 2], [3, 1], [30, 7]]], dtype=torch.int64)
    return x, coords, spec
