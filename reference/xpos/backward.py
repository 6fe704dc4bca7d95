"""xPos's backward pass in float64: the VJP of ``reference.xpos.apply`` for q and for k.

apply maps (q, k) to (q_out, k_out) with, per pair i of a token at position m (arXiv 2212.10554),

    q_out = s_i(m) R_m q,   s_i(m) = zeta_i^((m - c)/B);     k_out = s_i(m)^(-1) R_m k,

and the tail past rotary_dim copied. Each output depends on its own input only, linearly (the scale
is a number per position and pair, the same for both elements of the pair, so it commutes with the
pair's rotation). The VJP of cotangents (g_q, g_k) is therefore the transpose per pair:

    grad_q = s_i(m) R_{-m} g_q,     grad_k = s_i(m)^(-1) R_{-m} g_k,     tails: g_q, g_k.

Unlike RoPE's this is not the forward at -m (the scale would become zeta^((-m - c)/B)): the
rotation is taken at -m and the scale at +m, by handing RoPE's amplitude code
(``reference.numerics.phase.scaled_rotate``) the negated positions and a factor that negates them back.
Modes as the forward: fast, the fast rotation at -m times the float64 scale (the forward's: within
2^-51 relative on the cpu backend, rounded once on the others); golden, each value
the nearest double to the exact s_i(m) (a cos + b sin) (resp. s_i(m) (b cos - a sin)), over- and
underflow included. Shapes: g_q, g_k [batch, seq, heads, head_dim], positions int [batch, seq].

Mutants (``mutants``): backward-transposed (R_m), backward-layout (the other pairing),
backward-missing (zeros), backward-scale (the scale left out, or the q and k scales swapped).
Never imports torch.
"""

from __future__ import annotations

import numpy as np

from reference.numerics import rotation_backward
from reference.numerics import phase
from reference.numerics.validate import (check_backend, check_base, check_layout, check_mode, check_positions,
                                      resolve_rotary_dim)

from .core import _check, _factor, apply, fast_scales

__all__ = ["apply_vjp", "mutants"]


def _negated(factor):
    """The factor at -m: scaled_rotate is handed -m for the rotation, the scale stays at +m."""

    def at(prec, m, i):
        return factor(prec, -m, i)

    return at


def apply_vjp(g_q, g_k, positions, *, rotary_dim=None, base=10000.0, layout="interleaved", scale_base=512.0,
              gamma=0.4, centre=0.0, backend="cpu", mode="fast"):
    """(grad_q, grad_k), float64 [batch, seq, heads, head_dim] each: the VJP of xpos.apply for the
    cotangents g_q, g_k of (q_out, k_out) (module docstring). Arguments as xpos.apply."""
    scale_base, gamma, centre = _check(scale_base, gamma, centre)
    gq = rotation_backward.check_cotangent(g_q, "g_q")
    gk = rotation_backward.check_cotangent(g_k, "g_k")
    if gq.shape != gk.shape:
        raise ValueError(f"g_k: shape {gk.shape} differs from g_q's {gq.shape}")
    r = resolve_rotary_dim(rotary_dim, gq.shape[3])
    layout = check_layout(layout)
    m = check_positions(positions, gq.shape[:2])
    backend, mode = check_backend(backend), check_mode(mode)
    table = phase.ladder(r, check_base(base))
    out = []
    for g, sign in ((gq, 1), (gk, -1)):
        plain = _factor(r, scale_base, gamma, centre, sign)
        # scaled_rotate hands fast_factors the positions it rotates by (-m): the scale is taken at +m
        fast = None if backend != "cpu" else (
            lambda flat, plain=plain, sign=sign: fast_scales(-flat, r, scale_base, gamma, centre, sign, plain))
        out.append(phase.scaled_rotate(g, -m, table, _negated(plain), r, layout, backend, mode, fast_factors=fast))
    return tuple(out)


def mutants(g_q, g_k, positions, *, rotary_dim=None, base=10000.0, layout="interleaved", scale_base=512.0,
            gamma=0.4, centre=0.0, backend="numpy", mode="fast") -> dict:
    """{diagnosis code: [(description, (wrong grad_q, wrong grad_k))]} for the mistakes of a
    backward: R_m instead of R_{-m} (the forward reused), the other layout, no gradient, the scale
    missing (RoPE's VJP alone) or the q and k scales swapped."""
    kw = dict(rotary_dim=rotary_dim, base=base, scale_base=scale_base, gamma=gamma, centre=centre,
              backend=backend, mode=mode)
    layout = check_layout(layout)
    other = "interleaved" if layout == "half" else "half"
    gq = rotation_backward.check_cotangent(g_q, "g_q")
    gk = rotation_backward.check_cotangent(g_k, "g_k")
    m = check_positions(positions, gq.shape[:2])
    rope_kw = dict(rotary_dim=rotary_dim, base=base, layout=layout, backend=backend, mode=mode)
    swapped = apply_vjp(gk, gq, m, layout=layout, **kw)
    return {
        "backward-transposed": [("the gradients are rotated by R_m instead of R_{-m}",
                                 apply(gq, gk, m, layout=layout, **kw))],
        "backward-layout": [(f"the gradients are paired in the {other} layout",
                             apply_vjp(gq, gk, m, layout=other, **kw))],
        "backward-missing": [("no gradient reaches q or k", (np.zeros_like(gq), np.zeros_like(gk)))],
        "backward-scale": [("the xPos scale is missing from the backward",
                            (rotation_backward.apply_vjp(gq, m, **rope_kw),
                             rotation_backward.apply_vjp(gk, m, **rope_kw))),
                           ("the q and k scales are swapped in the backward", (swapped[1], swapped[0]))],
    }
