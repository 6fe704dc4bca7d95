"""M-RoPE's backward pass in float64: the VJP of ``reference.mrope.apply``.

apply turns pair i of a token by p_s(i) theta_i, p_s the token's position in the pair's stream
s(i) (t, h or w; Qwen2-VL / Qwen3-VL): a block-diagonal rotation R with one 2x2 block per pair, the
tail copied. It is linear in x with Jacobian R, and R^T turns every block back by its own angle:

    grad_x = R^T g = (pair i turned by -p_s(i) theta_i),     tail: g,

that is M-RoPE at the negated positions of every stream. ``apply_vjp`` is ``mrope.apply`` at -p
(positions [3, batch, seq] negated exactly), so fast mode reuses the forward's backend kernels and
golden mode is the correctly rounded VJP. Shapes: g [batch, seq, heads, head_dim].

Mutants (``mutants``): backward-transposed (the forward at +p), backward-layout (the other pair
layout), backward-missing (zeros), backward-scale (doubled). A wrong stream split is a forward bug
(graded by mrope.apply), not a backward one. Never imports torch.
"""

from __future__ import annotations

import numpy as np

from reference.numerics import rotation_backward

from .core import apply

__all__ = ["apply_vjp", "mutants"]


def _negated(positions):
    pos = np.asarray(positions)
    if pos.dtype.kind not in "iu":
        raise ValueError(f"positions: must be an integer array, got dtype {pos.dtype}")
    if pos.size and (int(pos.max()) > 2**53 or int(pos.min()) < -(2**53)):
        raise ValueError("positions: |position| above 2**53 is not supported")
    return -pos.astype(np.int64)


def apply_vjp(g, positions, *, mrope_section, variant="qwen2", rotary_dim=None, base=10000.0, layout="half",
              backend="cpu", mode="fast"):
    """grad_x = R^T g: each pair turned back by its stream's angle, the tail passed through.

    g [batch, seq, heads, head_dim], positions int [3, batch, seq]; other arguments as
    mrope.apply. float64 shaped like g."""
    cot = rotation_backward.check_cotangent(g)
    return apply(cot, _negated(positions), mrope_section=mrope_section, variant=variant, rotary_dim=rotary_dim,
                 base=base, layout=layout, backend=backend, mode=mode)


def mutants(g, positions, *, mrope_section, variant="qwen2", rotary_dim=None, base=10000.0, layout="half",
            backend="numpy", mode="fast") -> dict:
    """{diagnosis code: [(description, wrong gradient)]}: R instead of R^T, the other layout, zeros,
    and the gradient doubled (backward-scale)."""
    cot = rotation_backward.check_cotangent(g)
    kw = dict(mrope_section=mrope_section, variant=variant, rotary_dim=rotary_dim, base=base, backend=backend,
              mode=mode)
    other = "interleaved" if layout == "half" else "half"
    right = apply_vjp(cot, positions, layout=layout, **kw)
    return {
        "backward-transposed": [("the gradient is rotated forward (R) instead of back (R^T)",
                                 apply(cot, np.asarray(positions), layout=layout, **kw))],
        "backward-layout": [(f"the gradient is paired in the {other} layout",
                             apply_vjp(cot, positions, layout=other, **kw))],
        "backward-missing": [("no gradient reaches x", np.zeros_like(cot))],
        "backward-scale": [("the gradient is doubled", 2.0 * right)],
    }
