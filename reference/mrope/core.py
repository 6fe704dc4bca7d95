"""M-RoPE: the stream of each pair and apply (see __init__)."""

from __future__ import annotations

import numpy as np

from reference.numerics import phase
from reference.numerics.validate import (as_x, check_backend, check_base, check_layout, check_mode, check_positions,
                                      check_x, resolve_rotary_dim)

VARIANTS = ("qwen2", "qwen3")


def streams(rotary_dim: int, mrope_section, variant: str = "qwen2") -> np.ndarray:
    """int [r/2]: 0 (t), 1 (h) or 2 (w) for each pair."""
    half = int(rotary_dim) // 2
    sec = [int(v) for v in mrope_section]
    if len(sec) != 3 or any(v < 0 for v in sec):
        raise ValueError(f"mrope_section: must be three non-negative integers, got {mrope_section!r}")
    if variant not in VARIANTS:
        raise ValueError(f"variant: must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if variant == "qwen2":
        if sum(sec) != half:
            raise ValueError(f"mrope_section: qwen2 sections must add up to rotary_dim // 2 = {half}, got {sec}")
        return np.repeat(np.arange(3), sec)
    out = np.zeros(half, dtype=np.int64)
    for stream, offset in ((1, 1), (2, 2)):
        out[offset:3 * sec[stream]:3] = stream
    # h takes pairs 1, 4, ... below min(3 h, r/2), w pairs 2, 5, ...: each must get its count (h may
    # reach pair 3 h - 2 = r/2 - 1, as Qwen3.5's [11, 11, 10] over 32 pairs does), t the rest.
    if sum(sec) != half or np.bincount(out, minlength=3).tolist() != sec:
        raise ValueError(f"mrope_section: qwen3 sections must add up to {half} with h pairs 1, 4, ... and w pairs "
                         f"2, 5, ... below {half} (3 h - 2 < {half}, 3 w - 1 < {half}), got {sec}")
    return out


def apply(x, positions, *, mrope_section, variant="qwen2", rotary_dim=None, base=10000.0, layout="half",
          backend="cpu", mode="fast"):
    """M-RoPE of x [batch, seq, heads, head_dim] at positions [3, batch, seq] (t, h, w), float64.

    fast: cos/sin of each stream from reference.numerics.phase (the chosen backend), picked per pair,
    rotated in float64. golden: every output the nearest double to the exact a cos - b sin (a sin + b cos).
    """
    out = as_x(x)  # may be the caller's array: the cpu fast path only reads it
    r = resolve_rotary_dim(rotary_dim, out.shape[3])
    layout = check_layout(layout)
    pos = np.asarray(positions)
    if pos.ndim != 3 or pos.shape[0] != 3:
        raise ValueError(f"positions: must be [3, batch, seq] (t, h, w), got shape {pos.shape}")
    pos = np.stack([check_positions(p, out.shape[:2]) for p in pos])
    which = streams(r, mrope_section, variant)
    backend, mode = check_backend(backend), check_mode(mode)
    table = phase.ladder(r, check_base(base))
    if (backend, mode) != ("cpu", "fast"):
        out = check_x(x)  # the other paths rotate a private copy in place
    return phase.rotate_streams(out, pos, which, np.arange(r // 2), table, layout, backend, mode)
