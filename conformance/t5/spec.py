"""The ``spec`` of a T5 bucket case."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class T5Spec:
    """num_buckets, max_distance, and bidirectional (encoder) or causal (decoder)."""

    num_buckets: int = 32
    max_distance: int = 128
    bidirectional: bool = True


def spec_of(params) -> T5Spec:
    return T5Spec(int(params["num_buckets"]), int(params["max_distance"]), bool(params["bidirectional"]))
