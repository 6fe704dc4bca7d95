"""The ``spec`` of an axial 2-D RoPE case."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rope2dSpec:
    """head_dim (a multiple of 4), base (theta_k = base^(-4k/d)), layout, order ("x", "y"): the
    coordinate of the first d/4 pairs first, and cls_tokens: leading tokens left unrotated."""

    head_dim: int
    base: float
    layout: str
    order: tuple
    cls_tokens: int


def spec_of(params) -> Rope2dSpec:
    return Rope2dSpec(int(params["head_dim"]), float(params["base"]), str(params["layout"]),
                      tuple(params["order"]), int(params["cls_tokens"]))
