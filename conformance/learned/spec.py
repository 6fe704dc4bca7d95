"""Case parameters handed to a user's adapter (the ``spec`` argument of ``learned.lookup``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class LearnedSpec:
    """Parameters of one learned absolute position embedding case.

    num_positions  rows of the table (BERT-base 512, GPT-2 1024, RoBERTa-base 514): the length
                   wall; a position whose row is outside [0, num_positions) must raise
    d_model        the width of x and of the table
    variant        "absolute" (BERT, GPT-2: row = position) or "roberta" (row = position +
                   padding_idx + 1; padding tokens are marked -1 in positions and read row
                   padding_idx)
    padding_idx    the padding row of the roberta variant (RoBERTa: 1); None for absolute
    """

    num_positions: int
    d_model: int
    variant: str = "absolute"
    padding_idx: Optional[int] = None


def spec_of(params) -> LearnedSpec:
    """The LearnedSpec of a golden case's parameters."""
    pad = params.get("padding_idx")
    return LearnedSpec(
        num_positions=int(params["num_positions"]),
        d_model=int(params["d_model"]),
        variant=str(params.get("variant", "absolute")),
        padding_idx=None if pad is None else int(pad),
    )
