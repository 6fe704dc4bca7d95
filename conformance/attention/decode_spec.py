"""The ``spec`` of an ``attention.decode`` case: the layer's static configuration and the semantics
of the lengths that RoPE scalings read (the second argument of the factory)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from conformance.attention.spec import AttentionSpec, spec_of as forward_spec_of


@dataclass(frozen=True)
class DecodeSpec(AttentionSpec):
    """AttentionSpec's static fields (num_heads, num_kv_heads, head_dim, causal, encoding, base,
    rotary_dim, layout, scaling; attention_mask, past_keys and past_values stay None: the mask
    comes with every call and the cache is the layer's own), plus:

    semantics      "recompute" (the default; HF's): at every step each key, cached or new, is
                   rotated with the table of the current length, seq_len = the largest position
                   so far + 1, as if the history were prefilled again; "fixed" (vLLM's): one table
                   for the whole run, seq_len = max_model_len. A layer implementing one of them
                   raises conformance.Unsupported for the other (a skip, the user's choice).
    max_model_len  the run's longest length (vLLM's ``max_model_len``), the seq_len of "fixed".
    seq_len        0: the length changes from step to step (see semantics).
    """

    semantics: str = "recompute"
    max_model_len: int = 0

    def step_seq_len(self, largest_position: int) -> int:
        """The seq_len of the reference at a step whose tokens so far reach ``largest_position``."""
        return self.max_model_len if self.semantics == "fixed" else int(largest_position) + 1


def spec_of(params) -> DecodeSpec:
    base = forward_spec_of(params)
    fields = {f: getattr(base, f) for f in base.__dataclass_fields__}
    return DecodeSpec(**fields, semantics=str(params.get("semantics", "recompute")),
                      max_model_len=int(params.get("max_model_len") or 0))


def forward_spec(spec: DecodeSpec, seq_len: int) -> AttentionSpec:
    """attention.forward's spec of one step's reference (the static fields, the step's seq_len)."""
    fields = {f: getattr(spec, f) for f in AttentionSpec.__dataclass_fields__}
    return replace(AttentionSpec(**fields), seq_len=int(seq_len))
