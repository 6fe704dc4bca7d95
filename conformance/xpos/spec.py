"""The ``spec`` of an xpos case."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class XposSpec:
    """head_dim, rotary_dim, base (theta_i = base^(-2i/r)), layout ("interleaved" as torchscale,
    or "half"), scale_base B and gamma: zeta_i = (2i + gamma r) / ((1 + gamma) r); q at m is scaled
    by zeta_i^((m - c)/B), k by zeta_i^(-(m - c)/B), with any common centring c."""

    head_dim: int
    rotary_dim: int
    base: float = 10000.0
    layout: str = "interleaved"
    scale_base: float = 512.0
    gamma: float = 0.4


def spec_of(params) -> XposSpec:
    return XposSpec(int(params["head_dim"]), int(params["rotary_dim"]), float(params["base"]), str(params["layout"]),
                    float(params["scale_base"]), float(params["gamma"]))
