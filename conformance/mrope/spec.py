"""The ``spec`` of an M-RoPE case."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MropeSpec:
    """head_dim, rotary_dim (< head_dim: the rest passes through, GLM-4V and Qwen3.5), base,
    layout ("half": rotate_half, as the Qwen models; "interleaved": pairs (2i, 2i + 1), as GLM-4V),
    mrope_section (three pair counts for t, h, w) and variant ("qwen2": consecutive sections of one
    ladder; "qwen3": interleaved)."""

    head_dim: int
    rotary_dim: int
    base: float
    layout: str
    mrope_section: tuple
    variant: str


def spec_of(params) -> MropeSpec:
    return MropeSpec(int(params["head_dim"]), int(params["rotary_dim"]), float(params["base"]), str(params["layout"]),
                     tuple(int(v) for v in params["mrope_section"]), str(params["variant"]))
