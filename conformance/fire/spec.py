"""The ``spec`` of a FIRE case."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FireSpec:
    """num_heads, hidden (the MLP's width), init_L (the threshold's frozen scale, 512), eps (1e-6,
    added to the normalizer) and causal (only keys j <= i are graded). The weights come as the
    adapter's ``params`` dict."""

    num_heads: int
    hidden: int = 32
    init_L: float = 512.0
    eps: float = 1e-6
    causal: bool = True


def spec_of(params) -> FireSpec:
    return FireSpec(int(params["num_heads"]), int(params["hidden"]), float(params["init_L"]), float(params["eps"]),
                    bool(params["causal"]))
