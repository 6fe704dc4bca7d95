"""The ``spec`` of an ``attention.mla`` case (the last argument of the adapter)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional


@dataclass(frozen=True)
class MlaSpec:
    """DeepSeek multi-head latent attention's positional configuration (HF DeepseekV3Config names).

    num_heads     h query heads; every head has its own q_nope, q_pe, k_nope and v, and all share
                  the token's one rope key k_pe
    d_nope        qk_nope_head_dim: the features without position
    d_rope        qk_rope_head_dim: the features RoPE turns (even)
    d_v           v_head_dim
    base          rope_theta
    layout        the rope features' pairs: "interleaved" (2j, 2j+1), as DeepSeek's checkpoints
                  hold them (HF rope_interleave=True), or "half" (j, j + d_rope/2), rotate_half
    scaling       HF rope_parameters: None, or YaRN {"rope_type": "yarn", "factor",
                  "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale",
                  "mscale_all_dim"}: the rope part's frequencies and its cos / sin factor
                  mscale(factor, mscale) / mscale(factor, mscale_all_dim), and the softmax scale
                  (d_nope + d_rope)^-1/2 * mscale(factor, mscale_all_dim)^2, with
                  mscale(s, m) = 0.1 m ln s + 1 (s > 1)
    causal        query i sees keys j <= i
    """

    num_heads: int
    d_nope: int
    d_rope: int
    d_v: int
    base: float = 10000.0
    layout: str = "interleaved"
    scaling: Optional[Mapping[str, Any]] = field(default=None, hash=False, compare=False)
    causal: bool = True

    @property
    def qk_head_dim(self) -> int:
        return self.d_nope + self.d_rope


def spec_of(params) -> MlaSpec:
    return MlaSpec(num_heads=int(params["num_heads"]), d_nope=int(params["d_nope"]), d_rope=int(params["d_rope"]),
                   d_v=int(params["d_v"]), base=float(params.get("base", 10000.0)),
                   layout=str(params.get("layout", "interleaved")), scaling=copy.deepcopy(params.get("scaling")),
                   causal=bool(params.get("causal", True)))


def reference_config(spec: MlaSpec):
    """The spec as reference.attention.mla's MlaConfig."""
    from reference.attention.mla import MlaConfig

    return MlaConfig(spec.num_heads, spec.d_nope, spec.d_rope, spec.d_v, spec.base, spec.layout, spec.scaling,
                     spec.causal)
