"""The ``spec`` of an axial 2-D RoPE case."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class Rope2dSpec:
    """head_dim (a multiple of 4), base (theta_k = base^(-4k/d)), layout, order ("x", "y"): the
    coordinate of the first d/4 pairs first, cls_tokens: leading tokens left unrotated, and freqs:
    None (axial), or RoPE-Mixed's learned (f_x, f_y) [2][heads][d/2] (pair i of head h turns by
    x f_x[h][i] + y f_y[h][i])."""

    head_dim: int
    base: float
    layout: str
    order: tuple
    cls_tokens: int
    freqs: Optional[tuple] = field(default=None, hash=False)  # RoPE-Mixed: [2][heads][d/2] (f_x, f_y)


def spec_of(params) -> Rope2dSpec:
    freqs = params.get("freqs")
    return Rope2dSpec(int(params["head_dim"]), float(params["base"]), str(params["layout"]),
                      tuple(params["order"]), int(params["cls_tokens"]),
                      None if freqs is None else tuple(tuple(tuple(r) for r in axis) for axis in freqs))
