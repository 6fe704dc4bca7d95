"""M-RoPE identities (Qwen2-VL and Qwen3-VL), on the reference in golden mode."""

from __future__ import annotations

import numpy as np

from reference.identities import register
from reference.mrope import apply, backward, streams
from reference.numerics import rotation, rotation_backward

CONFIGS = (([16, 24, 24], "qwen2"), ([24, 20, 20], "qwen3"))


@register(id="mrope.text-is-rope", bound=0.0,
          statement="with t = h = w (text tokens), M-RoPE equals 1-D RoPE bit for bit (golden, both variants)")
def text_is_rope() -> float:
    """Residual: max |mrope(x, (p, p, p)) - rope(x, p)|. Bound 0: every pair then turns by p theta_i,
    and both are the correctly rounded value of the same real."""
    x = np.random.default_rng(1).standard_normal((1, 4, 1, 128))
    p = np.array([[0, 1, 4095, 2**20]])
    expected = rotation.apply(x, p, base=1e6, mode="golden")
    return max(float(np.max(np.abs(apply(x, np.stack([p, p, p]), mrope_section=sec, variant=v, base=1e6,
                                         mode="golden") - expected))) for sec, v in CONFIGS)


@register(id="mrope.sections-partition", bound=0.0,
          statement="the sections partition the ladder: every pair reads exactly one stream, and stream k has "
          "mrope_section[k] pairs (both variants)")
def sections_partition() -> float:
    """Residual: the number of pairs whose count disagrees (0 when the partition is right)."""
    bad = 0
    for sec, variant in CONFIGS:
        which = streams(128, sec, variant)
        bad += int(which.size != 64) + int(np.sum(np.abs(np.bincount(which, minlength=3) - np.array(sec))))
    return float(bad)


# ---- the backward pass (reference/mrope/backward.py) --------------------------------------------


@register(id="mrope.backward-adjoint", bound=19 * 2.0**-53,
          statement="<VJP(g), dx> = <g, M-RoPE(dx)> per token and head (qwen2 and qwen3 sections, distinct "
          "t, h, w streams up to 2^20, rotary 48 of 64)")
def backward_adjoint() -> float:
    """Residual: max over tokens and heads of |<apply_vjp(g), dx> - <g, apply(dx)>| / N,
    N = sum_pairs |g_pair| |dx_pair| + sum_tail |g_j| |dx_j|.

    Bound 19u: each side rotates each pair with cos/sin within 1.5 ulp (3u) by two products and a sum:
    5u (|a c| + |b s|) <= 5u |pair| per element, 7.1u |pair| per pair (RoPE's count), 7.1u N in the dot
    (Cauchy-Schwarz); the fsum dot adds 2u N. Both sides 9.1u N: 18.2u apart.
    """
    rng = np.random.default_rng(2409_12191)
    worst = 0.0
    for variant, section, layout in (("qwen2", (4, 10, 10), "half"), ("qwen3", (8, 8, 8), "interleaved")):
        pos = np.stack([rng.integers(0, 2**20, (2, 6)) for _ in range(3)])
        g, dx = rng.standard_normal((2, 6, 2, 64)), rng.standard_normal((2, 6, 2, 64))
        kw = dict(mrope_section=section, variant=variant, rotary_dim=48, layout=layout, backend="numpy")
        grad = backward.apply_vjp(g, pos, **kw)
        worst = max(worst, rotation_backward.adjoint_residual(grad, dx, g, apply(dx, pos, **kw),
                                                          rotation_backward.pair_weights(g, dx, 48, layout)))
    return worst
