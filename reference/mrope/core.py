"""M-RoPE: the stream of each pair and apply (see __init__)."""

from __future__ import annotations

import mpmath
import numpy as np

from reference.rope import phase
from reference.rope._validate import (check_backend, check_base, check_layout, check_mode, check_positions,
                                      check_x, resolve_rotary_dim)
from reference.rope.layouts import pair_indices

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
    if 3 * max(sec[1], sec[2]) > half or sum(sec) != half:
        raise ValueError(f"mrope_section: qwen3 sections must add up to {half} with 3 * h, 3 * w <= {half}, got {sec}")
    out = np.zeros(half, dtype=np.int64)
    for stream, offset in ((1, 1), (2, 2)):
        out[offset:3 * sec[stream]:3] = stream
    return out


def apply(x, positions, *, mrope_section, variant="qwen2", rotary_dim=None, base=10000.0, layout="half",
          backend="cpu", mode="fast"):
    """M-RoPE of x [batch, seq, heads, head_dim] at positions [3, batch, seq] (t, h, w), float64.

    fast: cos/sin of each stream from reference.rope (the chosen backend), picked per pair, rotated in
    float64. golden: every output the nearest double to the exact a cos - b sin (a sin + b cos).
    """
    out = check_x(x)
    r = resolve_rotary_dim(rotary_dim, out.shape[3])
    layout = check_layout(layout)
    pos = np.asarray(positions)
    if pos.ndim != 3 or pos.shape[0] != 3:
        raise ValueError(f"positions: must be [3, batch, seq] (t, h, w), got shape {pos.shape}")
    pos = np.stack([check_positions(p, out.shape[:2]) for p in pos])
    which = streams(r, mrope_section, variant)
    backend, mode = check_backend(backend), check_mode(mode)
    table = phase.ladder(r, check_base(base))
    first, second = pair_indices(r, layout)
    pairs = np.arange(r // 2)
    if mode == "fast":
        cs = [phase._cos_sin(pos[s], table, backend, "fast") for s in range(3)]
        c = np.stack([cs[s][0] for s in range(3)])[which, :, :, pairs].transpose(1, 2, 0)
        s_ = np.stack([cs[s][1] for s in range(3)])[which, :, :, pairs].transpose(1, 2, 0)
        a, b = out[..., first].copy(), out[..., second].copy()
        c, s_ = c[:, :, None, :], s_[:, :, None, :]
        out[..., first] = a * c - b * s_
        out[..., second] = a * s_ + b * c
        return out
    one = lambda prec, m, i: mpmath.mpf(1)  # noqa: E731 - no amplitude
    for bi, si, h in np.ndindex(out.shape[0], out.shape[1], out.shape[2]):
        a_row, b_row = out[bi, si, h, first].copy(), out[bi, si, h, second].copy()
        for i in pairs:
            m = int(pos[which[i], bi, si])
            a, b = float(a_row[i]), float(b_row[i])
            out[bi, si, h, first[i]] = phase._settle(phase._scaled(one, table, m, int(i), a, -b))
            out[bi, si, h, second[i]] = phase._settle(phase._scaled(one, table, m, int(i), b, a))
    return out
