"""The ``spec`` of a NoPE case."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NopeSpec:
    """head_dim: the size of x's last axis (a NoPE layer of a model whose other layers use RoPE)."""

    head_dim: int


def spec_of(params) -> NopeSpec:
    return NopeSpec(int(params["head_dim"]))
