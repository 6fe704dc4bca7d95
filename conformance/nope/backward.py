"""NoPE's backward pass for ``--grad`` (nope.apply): the gradient of the identity map.

Formula. nope.apply returns x unchanged, y = x: the Jacobian is the identity, so the VJP with a
cotangent g is g itself, element for element (no reference arithmetic to compute).

Budget: none. Autograd of ``return x`` (or of a copy, or of an upcast round trip) hands g back
unchanged; nothing is rounded, so the gradient is graded exactly like the forward
(conformance.nope.apply): any element that differs from g is over budget (ratio 2). A gradient
that does not reach x at all (an output computed from ``x.detach()``, under no_grad, through
NumPy) is the runner's ``backward-missing``.

Diagnosis (core codes): a zero gradient (backward-missing), c g for a constant c != 1
(backward-scale: within one rounding of c g). Shapes: g and gradients [batch, seq, heads,
head_dim] float64.
"""

from __future__ import annotations

import numpy as np

from conformance.core import tolerance
from conformance.core.protocol import Graded
from conformance.core.tensors import argmax_index, check_tensor, finite_max, over_budget
from conformance.core.rotation_backward import explain_gradient, missing_gradient
from conformance.nope.exact import changed
from conformance.nope.spec import NopeSpec


def grade_gradient(prepared, g, grad) -> Graded:
    """Graded of x's gradient (tensor or None) against g, exactly."""
    if grad is None:
        return missing_gradient("x")
    out, problems, got = check_tensor(grad, "the gradient of x", g.shape, None, prepared.device)
    graded = Graded(problems=problems, output_f64=out, output_dtype=got)
    if out is None:
        return graded
    wrong = changed(out, g)
    graded.max_abs_error = finite_max(np.where(wrong, np.abs(out - g), 0.0))
    ratio = np.where(wrong, 2.0, 0.0)
    for profile in tolerance.PROFILES:
        graded.ratio[profile] = float(ratio.max(initial=0.0))
        graded.worst_index[profile] = argmax_index(ratio) if ratio.size else None
        graded.mismatch[profile] = over_budget(ratio) + ("values",)
    return graded


def diagnose_gradient(dtype, g, got) -> list:
    """A zero gradient, or c g (each element within one rounding in dtype of c g)."""
    u = tolerance.unit_roundoff(dtype)

    def ratio_of(candidate, _key):
        budget = u * np.abs(candidate) + tolerance.SMALLEST_SUBNORMAL[dtype]
        return float(np.max(tolerance.ratio(np.abs(got - candidate), budget), initial=0.0))

    return explain_gradient(ratio_of, got, g, [], "x")


def gradcheck_case():
    """(x [1, 4, 1, 8] float64, positions [1, 4], spec)."""
    import torch

    x = torch.randn(1, 4, 1, 8, generator=torch.Generator().manual_seed(15), dtype=torch.float64)
    return x, torch.tensor([[0, 1, 7, 1000]], dtype=torch.int64), NopeSpec(head_dim=8)
