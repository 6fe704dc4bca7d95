"""Axial 2-D RoPE's backward pass in float64: the VJP of ``reference.rope2d.apply``.

apply turns pair i of a patch at integer coordinates c = (x, y) by an angle phi_i(c) that is linear
in c: c_a(i) theta_k (axial; RoPE-ViT, Qwen2-VL's vision encoder) or x f_x[h, i] + y f_y[h, i]
(RoPE-Mixed). Leading CLS tokens are copied. The map is linear in the patch vector with a
block-diagonal rotation R as Jacobian, so

    grad = R^T g: pair i turned by -phi_i(c) = phi_i(-c),     CLS tokens: g,

which is apply at the negated coordinates (the angle is linear in c, and -c is exact).
``apply_vjp`` calls ``rope2d.apply`` with -coords: fast mode reuses the forward's kernels (for
RoPE-Mixed the float64 angle of -c is exactly the negated angle of c, so the backward turns by
exactly the computed forward angle, backwards), golden mode is correctly rounded.
Shapes: g [batch, seq, heads, head_dim], coords int [batch, seq, 2].

The learned frequencies of RoPE-Mixed are part of the spec (not an input of the protocol), so no
gradient with respect to them is given here. Mutants (``mutants``): backward-transposed,
backward-layout, backward-missing (zeros; or CLS tokens without gradient), backward-scale (doubled).
Never imports torch.
"""

from __future__ import annotations

import numpy as np

from reference.numerics import rotation_backward

from .core import apply

__all__ = ["apply_vjp", "mutants"]


def _negated(coords):
    c = np.asarray(coords)
    if c.dtype.kind not in "iu":
        raise ValueError(f"coords: must be integers, got dtype {c.dtype}")
    if c.size and (int(c.max()) > 2**53 or int(c.min()) < -(2**53)):
        raise ValueError("coords: |coordinate| above 2**53 is not supported")
    return -c.astype(np.int64)


def apply_vjp(g, coords, *, base=100.0, layout="interleaved", order=("x", "y"), cls_tokens=0, freqs=None,
              backend="cpu", mode="fast"):
    """grad = R^T g (each pair turned back by its own angle), CLS tokens passed through.

    g [batch, seq, heads, head_dim], coords int [batch, seq, 2]; other arguments as rope2d.apply.
    float64 shaped like g."""
    cot = rotation_backward.check_cotangent(g)
    return apply(cot, _negated(coords), base=base, layout=layout, order=order, cls_tokens=cls_tokens, freqs=freqs,
                 backend=backend, mode=mode)


def mutants(g, coords, *, base=100.0, layout="interleaved", order=("x", "y"), cls_tokens=0, freqs=None,
            backend="numpy", mode="fast") -> dict:
    """{diagnosis code: [(description, wrong gradient)]}: R instead of R^T, the other layout, zeros
    (and CLS tokens without gradient), the gradient doubled."""
    cot = rotation_backward.check_cotangent(g)
    kw = dict(base=base, order=order, cls_tokens=cls_tokens, freqs=freqs, backend=backend, mode=mode)
    other = "interleaved" if layout == "half" else "half"
    right = apply_vjp(cot, coords, layout=layout, **kw)
    out = {
        "backward-transposed": [("the gradient is rotated forward (R) instead of back (R^T)",
                                 apply(cot, np.asarray(coords), layout=layout, **kw))],
        "backward-layout": [(f"the gradient is paired in the {other} layout",
                             apply_vjp(cot, coords, layout=other, **kw))],
        "backward-missing": [("no gradient reaches x", np.zeros_like(cot))],
        "backward-scale": [("the gradient is doubled", 2.0 * right)],
    }
    if int(cls_tokens) > 0:
        no_cls = right.copy()
        no_cls[:, :int(cls_tokens)] = 0.0
        out["backward-missing"].append(("the CLS tokens get no gradient", no_cls))
    return out
