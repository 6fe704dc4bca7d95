"""M-RoPE identities (Qwen2-VL and Qwen3-VL), on the reference in golden mode."""

from __future__ import annotations

import numpy as np

from reference import rope
from reference.identities import register
from reference.mrope import apply, streams

CONFIGS = (([16, 24, 24], "qwen2"), ([24, 20, 20], "qwen3"))


@register(id="mrope.text-is-rope", bound=0.0,
          statement="with t = h = w (text tokens), M-RoPE equals 1-D RoPE bit for bit (golden, both variants)")
def text_is_rope() -> float:
    """Residual: max |mrope(x, (p, p, p)) - rope(x, p)|. Bound 0: every pair then turns by p theta_i,
    and both are the correctly rounded value of the same real."""
    x = np.random.default_rng(1).standard_normal((1, 4, 1, 128))
    p = np.array([[0, 1, 4095, 2**20]])
    expected = rope.apply(x, p, base=1e6, mode="golden")
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
