"""The ``spec`` of an attention case (the last argument of ``attention.forward``)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional


@dataclass(frozen=True)
class AttentionSpec:
    """Parameters of one attention layer call.

    num_heads, num_kv_heads, head_dim   hq query heads over hkv kv heads (query head h reads kv
                                        head h // (hq / hkv), HF repeat_kv), each of size d
    causal        query slot i (after the cache's P slots: slot P + i) sees key slots <= P + i
    encoding      "rope" (base, rotary_dim, layout "half" = rotate_half pairs (j, j + r/2) or
                  "interleaved" = pairs (2j, 2j+1), scaling in HF rope_parameters form, whose
                  attention factor multiplies cos and sin), "alibi" (bias -m_h (p_i - p_j), or
                  -m_h |p_i - p_j| when not causal, added to the scaled logits), "none", or
                  another additive bias on the scaled logits: "kerple" (kerple_variant "log":
                  -r1_h log(1 + r2_h |p_i - p_j|), "power": -r1_h |p_i - p_j|^r2_h, with
                  kerple_r1, kerple_r2 one float per query head as a checkpoint holds them,
                  before the clamps r1, r2 >= 1e-2 (power: r2 <= 2) the implementation applies,
                  as reference.kerple), "fire" (FIRE's MLP on psi(p_i - p_j) / (psi(max(p_i, L))
                  + 1e-6), psi(x) = log(|c x| + 1), L = |L_multiplier 512|; its weights are extra
                  entries of the weights dict: c, L_multiplier (0-d), W1 [hidden, 1], b1 [hidden],
                  W2 [num_heads, hidden], b2 [num_heads], as reference.fire), "t5" (the weights
                  entry rel_bias [num_buckets, num_heads], HF's relative_attention_bias.weight,
                  read at the bucket of p_j - p_i: T5's rule with num_buckets, max_distance,
                  bidirectional = not causal)
    logit_scale   the factor on q . k, None for 1 / sqrt(head_dim) (every layer but T5's, whose
                  scores are unscaled: 1.0; its scale is folded into the initialisation)
    scale         the logit scale in use: logit_scale, or 1 / sqrt(head_dim) (given for convenience;
                  pass it to SDPA as ``scale=``, whose default is 1 / sqrt(head_dim))
    attention_mask  None, or a bool tensor [batch, P + s] on the case's device: True where the
                  key is a real token (HF's attention_mask); rows of padded queries are not graded
    past_keys, past_values  None, or tensors [batch, hkv, P, d] in the dtype under test: the KV
                  cache after projection and RoPE (as HF's cache holds it), keys of positions
                  0..P-1; the new tokens follow at the given positions
    """

    num_heads: int
    num_kv_heads: int
    head_dim: int
    causal: bool = True
    encoding: str = "rope"
    base: float = 10000.0
    rotary_dim: int = 0
    layout: str = "half"
    scaling: Optional[Mapping[str, Any]] = field(default=None, hash=False, compare=False)
    seq_len: int = 0
    kerple_variant: str = "log"
    kerple_r1: tuple = ()
    kerple_r2: tuple = ()
    num_buckets: int = 32
    max_distance: int = 128
    logit_scale: Optional[float] = None
    attention_mask: Any = field(default=None, hash=False, compare=False, repr=False)
    past_keys: Any = field(default=None, hash=False, compare=False, repr=False)
    past_values: Any = field(default=None, hash=False, compare=False, repr=False)

    @property
    def scale(self) -> float:
        return self.head_dim ** -0.5 if self.logit_scale is None else float(self.logit_scale)

    @property
    def past_len(self) -> int:
        return 0 if self.past_keys is None else int(self.past_keys.shape[2])


def spec_of(params) -> AttentionSpec:
    """The static spec of a golden case (the tensors are added by the protocol's prepare)."""
    return AttentionSpec(
        num_heads=int(params["num_heads"]), num_kv_heads=int(params["num_kv_heads"]),
        head_dim=int(params["head_dim"]), causal=bool(params["causal"]), encoding=str(params["encoding"]),
        base=float(params.get("base", 10000.0)), rotary_dim=int(params.get("rotary_dim") or params["head_dim"]),
        layout=str(params.get("layout", "half")), scaling=copy.deepcopy(params.get("scaling")),
        seq_len=int(params.get("seq_len") or 0), kerple_variant=str(params.get("kerple_variant", "log")),
        kerple_r1=tuple(float(v) for v in params.get("kerple_r1", ())),
        kerple_r2=tuple(float(v) for v in params.get("kerple_r2", ())),
        num_buckets=int(params.get("num_buckets", 32)), max_distance=int(params.get("max_distance", 128)),
        logit_scale=None if params.get("logit_scale") is None else float(params["logit_scale"]))
