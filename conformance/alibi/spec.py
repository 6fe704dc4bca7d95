"""The ``spec`` of an ALiBi case."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AlibiSpec:
    """num_heads, and causal: -m (i - j) for keys j <= i (True) or -m |i - j| (False)."""

    num_heads: int
    causal: bool = True


def spec_of(params) -> AlibiSpec:
    return AlibiSpec(int(params["num_heads"]), bool(params["causal"]))
