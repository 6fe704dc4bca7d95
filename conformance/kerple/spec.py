"""The ``spec`` of a KERPLE case."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KerpleSpec:
    """variant: "log" (-r1 log(1 + r2 |i - j|)) or "power" (-r1 |i - j|^r2); r1, r2: one float per
    head, as the checkpoint holds them (before the clamps, which the implementation applies);
    causal: only keys j <= i are graded."""

    variant: str
    r1: tuple
    r2: tuple
    causal: bool = True

    @property
    def num_heads(self) -> int:
        return len(self.r1)


def spec_of(params) -> KerpleSpec:
    return KerpleSpec(str(params["variant"]), tuple(float(v) for v in params["r1"]),
                      tuple(float(v) for v in params["r2"]), bool(params["causal"]))
