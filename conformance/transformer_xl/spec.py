"""The ``spec`` of a transformer_xl.score case."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransformerXLSpec:
    """mlen       memory slots before the current segment (klen = qlen + mlen; keys 0..mlen-1 are memory)
    d_model    width of the sinusoid R (r_weight is [n_head * d_head, d_model])
    clamp_len  distances above it use R at clamp_len; 0: no clamp
    n_head, d_head and qlen come from the shapes of q."""

    mlen: int
    d_model: int
    clamp_len: int = 0


def spec_of(params) -> TransformerXLSpec:
    return TransformerXLSpec(int(params["mlen"]), int(params["d_model"]), int(params["clamp_len"]))
