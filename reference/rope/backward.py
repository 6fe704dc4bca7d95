"""RoPE's backward pass in float64: the vector-Jacobian product (VJP) of ``reference.rope.apply``.

Formula. For one token at position m, apply is the linear map y = f R_m x on each rotated pair
(f the attention factor of a scaling type, 1 without one; RoFormer, arXiv 2104.09864, eq. 15) and
y = x on the tail past rotary_dim. Its Jacobian is that same matrix, so the VJP of a cotangent g is

    grad_x = (f R_m)^T g = f R_m^T g = f R_{-m} g   on the pairs,     grad_x = g   on the tail,

because a rotation is orthogonal and R_m^T = R_{-m} (RoFormer eq. 16 uses the same fact). Per pair
(a, b) of g this is (a cos + b sin, -a sin + b cos), phi = m theta_i. The attention factor f is a
constant (it does not depend on x), so it enters the backward exactly as in the forward.

Shapes: g [batch, seq, heads, head_dim] (any real dtype, computed in float64), positions int
[batch, seq]; the result is float64 shaped like g.

Implementation (reference/numerics/rotation_backward.py). ``apply_vjp`` is ``reference.rope.apply`` at
-m (positions negated exactly), so:

- mode "fast" reuses the forward kernels of the chosen backend ("cpu" Numba, "cuda", "numpy" twin)
  and has the forward's accuracy: each output within (2 kappa + 2)(1 + 2**-50) ulps of its pair's
  norm (4 for kappa = 1, reference/rope/ACCURACY.md);
- mode "golden" is the golden forward at -m, which returns the float64 nearest to the exact
  f (a cos + b sin) (resp. f (b cos - a sin)): the VJP correctly rounded;
- the reduction m theta mod pi/2 is exact for every |m| <= 2**53, so -m is as accurate as m; the
  fast and golden cos/sin tables are odd/even bit for bit (cos(-phi) = cos(phi), sin(-phi) =
  -sin(phi)), which makes apply_vjp identical, bit for bit, to the transposed rotation built from
  the forward's own table (``transposed_rotation``; identity ``rope.backward-is-inverse-rotation``).

Mutants for diagnosis (the usual ways a hand-written backward goes wrong, each a function of the
same arguments as apply_vjp; ``mutants`` returns them by diagnosis code):

- backward-transposed: the gradient rotated by R_m instead of R_{-m} (the forward reused as is);
- backward-layout: the transpose of the other pair layout (half vs interleaved);
- backward-missing: no gradient reaches x (zeros; a detached output, or the tail dropped);
- backward-scale: the right rotation with the wrong amplitude (attention factor f missing, or
  applied twice: 1 or f**2 instead of f); for an unscaled spec the mutant is 2 R_{-m} g.

Never imports torch.
"""

from __future__ import annotations

import numpy as np

from reference.numerics.frequencies import frequencies
from reference.numerics.layouts import pair_indices
from reference.numerics.rotation import apply
# RoPE's backward API (apply_vjp, apply_jvp, transposed_rotation) is the rotation's, re-exported here
from reference.numerics.rotation_backward import (apply_jvp, apply_vjp, check_cotangent,  # noqa: F401
                                                  transposed_rotation)
from reference.numerics.validate import check_layout, check_positions, resolve_rotary_dim

__all__ = ["apply_vjp", "apply_jvp", "transposed_rotation", "mutants", "MUTANT_CODES"]

MUTANT_CODES = ("backward-transposed", "backward-layout", "backward-missing", "backward-scale")


def _attention_factor(r, base, scaling, seq_len) -> float:
    return frequencies(r, base, scaling, seq_len)[1]


def mutants(g, positions, *, rotary_dim=None, base=10000.0, layout="half", scaling=None, seq_len=None,
            backend="numpy", mode="fast") -> dict:
    """{diagnosis code: list of (description, wrong gradient float64 like g)} for the mistakes a
    backward makes (module docstring). Each candidate is exact where the mistake is (computed with
    the same reference kernels), so a conformance diagnosis can grade a user's gradient against it
    with the gradient budget: within budget of a mutant and over budget of the reference names it.
    """
    cot = check_cotangent(g)
    r = resolve_rotary_dim(rotary_dim, cot.shape[3])
    layout = check_layout(layout)
    m = check_positions(positions, cot.shape[:2])
    kw = dict(rotary_dim=r, base=base, scaling=scaling, seq_len=seq_len, backend=backend, mode=mode)
    other = "interleaved" if layout == "half" else "half"
    right = apply_vjp(cot, m, layout=layout, **kw)
    f = _attention_factor(r, base, scaling, seq_len)
    first, second = pair_indices(r, layout)
    pairs = np.concatenate([first, second])

    def rescaled(c):
        out = right.copy()
        out[..., pairs] *= c
        return out

    no_tail = right.copy()
    no_tail[..., r:] = 0.0
    scale = ([("the attention factor is missing from the backward (1 instead of f)", rescaled(1.0 / f)),
              ("the attention factor is applied twice in the backward (f**2 instead of f)", rescaled(f))]
             if f != 1.0 else [("the rotated pairs' gradient is doubled", rescaled(2.0))])
    out = {
        "backward-transposed": [("the gradient is rotated by R_m (the forward) instead of R_{-m}",
                                 apply(cot, m, layout=layout, **kw))],
        "backward-layout": [(f"the gradient is paired in the {other} layout", apply_vjp(cot, m, layout=other, **kw))],
        "backward-missing": [("no gradient reaches x (zeros, or the output is detached)", np.zeros_like(cot))],
        "backward-scale": scale,
    }
    if r < cot.shape[3]:
        out["backward-missing"].append(("the pass-through tail gets no gradient", no_tail))
    return out
