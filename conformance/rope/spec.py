"""Case parameters handed to a user's adapter (the ``spec`` argument of every protocol)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional


@dataclass(frozen=True)
class RopeSpec:
    """Parameters of one RoPE case.

    head_dim    size of the last axis of x
    rotary_dim  number of rotated features (even, <= head_dim); the tail passes through
    base        theta_i = base ** (-2 i / rotary_dim)
    layout      "half" (pairs (j, j + rotary_dim/2), GPT-NeoX / Llama rotate_half) or
                "interleaved" (pairs (2i, 2i+1), GPT-J / Meta rotate_every_two)
    scaling     None, or a dict in HF ``rope_parameters`` form, e.g.
                {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
                (types and keys: reference/rope/scaling/). Its attention factor is graded as HF
                applies it: a multiplier on cos and sin (docs/design.md, "RoPE scaling").
    seq_len     the sequence length the case models (dynamic scalings depend on it)
    """

    head_dim: int
    rotary_dim: int
    base: float = 10000.0
    layout: str = "half"
    scaling: Optional[Mapping[str, Any]] = field(default=None, hash=False)
    seq_len: int = 0


def spec_of(params) -> RopeSpec:
    """The RopeSpec of a golden case's parameters (a fresh copy of ``scaling``: adapters get it)."""
    import copy

    return RopeSpec(
        head_dim=int(params["head_dim"]),
        rotary_dim=int(params.get("rotary_dim") or params["head_dim"]),
        base=float(params.get("base", 10000.0)),
        layout=str(params.get("layout", "half")),
        scaling=copy.deepcopy(params.get("scaling")),
        seq_len=int(params.get("seq_len") or 0),
    )
