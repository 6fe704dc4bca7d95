"""Axial 2-D RoPE (see __init__)."""

from __future__ import annotations

import mpmath
import numpy as np

from reference.numerics import phase
from reference.numerics.validate import as_x, check_backend, check_base, check_layout, check_mode, check_x
from reference.numerics.layouts import pair_indices


def axes_of_pairs(head_dim: int) -> np.ndarray:
    """int [d/2]: 0 for the first d/4 pairs (first axis), 1 for the last d/4."""
    if head_dim % 4:
        raise ValueError(f"head_dim: axial 2-D RoPE needs a multiple of 4, got {head_dim}")
    return np.repeat([0, 1], head_dim // 4)


def apply(x, coords, *, base=100.0, layout="interleaved", order=("x", "y"), cls_tokens=0, freqs=None,
          backend="cpu", mode="fast"):
    """Axial 2-D RoPE of x [batch, seq, heads, head_dim] at integer coords [batch, seq, 2] = (x, y)
    (column, row), float64. order: which coordinate feeds the first r/4 pairs, ("x", "y") or
    ("y", "x"). The first cls_tokens tokens are copied unrotated.

    freqs: None (axial), or the mixed form (RoPE-ViT's RoPE-Mixed): float [2, heads, head_dim/2]
    learned frequencies (f_x, f_y) per head and pair; pair i of head h then turns by
    x f_x[h, i] + y f_y[h, i] (base and order unused). Mixed fast mode rounds that angle once in
    float64 and takes numpy's cos/sin (error about 2^-53 |angle| + 1 ulp); golden mode is the
    correctly rounded value of the exact angle."""
    out = as_x(x)  # may be the caller's array: written only after the private copy below
    c = np.asarray(coords)
    if c.shape != out.shape[:2] + (2,) or c.dtype.kind not in "iu":
        raise ValueError(f"coords: must be integers of shape {out.shape[:2] + (2,)}, got {c.shape} {c.dtype}")
    if not 0 <= int(cls_tokens) <= out.shape[1]:
        raise ValueError(f"cls_tokens: must be from 0 to seq, got {cls_tokens!r}")
    layout, backend, mode = check_layout(layout), check_backend(backend), check_mode(mode)
    c = c.astype(np.int64)
    if freqs is not None or (backend, mode) != ("cpu", "fast"):
        out = check_x(x)  # these paths rotate a private copy in place
    if freqs is not None:
        return _mixed(out, c, freqs, layout, int(cls_tokens), mode)
    d = out.shape[3]
    axes = axes_of_pairs(d)
    if tuple(order) not in (("x", "y"), ("y", "x")):
        raise ValueError(f"order: must be ('x', 'y') or ('y', 'x'), got {order!r}")
    if tuple(order) == ("y", "x"):
        c = c[..., ::-1]
    table = phase.ladder(d // 2, check_base(base))  # theta_k = base^(-2k/(d/2)) = base^(-4k/d), d/4 entries
    streams = np.moveaxis(c, -1, 0)  # [2, batch, seq]: the first axis, the second
    return phase.rotate_streams(out, streams, axes, np.arange(d // 2) % (d // 4), table, layout, backend, mode,
                                first_token=int(cls_tokens))


def _mixed(out, c, freqs, layout, start, mode):
    """RoPE-Mixed on validated float64 ``out`` and int64 coords ``c`` (see apply)."""
    d = out.shape[3]
    f = np.asarray(freqs, dtype=np.float64)
    if f.shape != (2, out.shape[2], d // 2) or not np.all(np.isfinite(f)):
        raise ValueError(f"freqs: must be finite floats of shape (2, heads, head_dim/2) = {(2, out.shape[2], d // 2)}")
    first, second = pair_indices(d, layout)
    if mode == "fast":
        ang = (c[:, :, None, None, 0] * f[0][None, None] + c[:, :, None, None, 1] * f[1][None, None])[:, start:]
        a, b = out[:, start:][..., first].copy(), out[:, start:][..., second].copy()
        out[:, start:, :, first] = a * np.cos(ang) - b * np.sin(ang)
        out[:, start:, :, second] = a * np.sin(ang) + b * np.cos(ang)
        return out
    for bi, si, h in np.ndindex(out.shape[0], out.shape[1], out.shape[2]):
        if si < start:
            continue
        a_row, b_row = out[bi, si, h, first].copy(), out[bi, si, h, second].copy()
        for i in range(d // 2):
            fx, fy = float(f[0, h, i]), float(f[1, h, i])
            cx, cy = int(c[bi, si, 0]), int(c[bi, si, 1])
            for j, (u, v) in ((first[i], (a_row[i], -b_row[i])), (second[i], (b_row[i], a_row[i]))):
                out[bi, si, h, j] = phase.settle(_mixed_compute(cx, cy, fx, fy, float(u), float(v)))
    return out


def _mixed_compute(cx, cy, fx, fy, u, v):
    """compute(prec) for Ziv's loop: u cos(phi) + v sin(phi), phi = cx fx + cy fy exactly."""

    def compute(prec):
        phi = mpmath.mpf(cx) * mpmath.mpf(fx) + mpmath.mpf(cy) * mpmath.mpf(fy)
        err = (abs(phi) + 1) * mpmath.mpf(2) ** (8 - prec)
        return mpmath.mpf(u) * mpmath.cos(phi) + mpmath.mpf(v) * mpmath.sin(phi), (abs(u) + abs(v) + 1) * err

    return compute
